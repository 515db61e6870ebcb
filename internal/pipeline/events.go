package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// eventWriter reads the events stream back in order, writes each event as a
// JSON line, counts them and calls OnEvent.
type eventWriter struct {
	cc      jetstream.ConsumeContext
	onEvent func(*schemas.Event)
	log     *slog.Logger

	// seen counts the messages handled (written, or refused and logged):
	// the drain compares it with the stream's message count.
	seen atomic.Uint64

	mu        sync.Mutex
	out       *bufio.Writer
	res       Result
	unwritten int   // events that could not be written
	writeErr  error // the first reason
}

func startEventWriter(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (*eventWriter, error) {
	w := &eventWriter{
		onEvent: cfg.OnEvent,
		log:     log,
		out:     bufio.NewWriterSize(orDiscard(cfg.EventsOut), 1<<16),
		res:     Result{ByType: map[string]map[string]int{}, Incidents: map[string]*schemas.Event{}},
	}
	ec, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventsAllFilter}})
	if err != nil {
		return nil, fmt.Errorf("events consumer: %w", err)
	}
	if w.cc, err = ec.Consume(w.handle); err != nil {
		return nil, fmt.Errorf("events consumer: %w", err)
	}
	return w, nil
}

func (w *eventWriter) handle(m jetstream.Msg) {
	defer w.seen.Add(1)
	ev, err := schemas.DecodeEvent(m.Data())
	if err != nil {
		w.log.Error("undecodable event on the stream", "subject", m.Subject(), "err", err)
		return
	}
	w.mu.Lock()
	w.write(ev)
	if w.res.ByType[ev.Type] == nil {
		w.res.ByType[ev.Type] = map[string]int{}
	}
	w.res.ByType[ev.Type][ev.State]++
	w.res.Incidents[ev.ID] = ev
	w.res.Events++
	w.mu.Unlock()
	if w.onEvent != nil {
		w.onEvent(ev)
	}
}

// write writes one JSON line. An event that cannot be encoded (a NaN in
// its evidence) is not written as a blank line: it is counted, logged and
// makes the run fail at the end, so nothing disappears silently.
func (w *eventWriter) write(ev *schemas.Event) {
	line, err := json.Marshal(ev)
	if err == nil {
		line = append(line, '\n')
		_, err = w.out.Write(line)
	}
	if err != nil {
		w.unwritten++
		if w.writeErr == nil {
			w.writeErr = fmt.Errorf("event %s (%s %s): %w", ev.ID, ev.Type, ev.State, err)
		}
		w.log.Error("event not written", "id", ev.ID, "type", ev.Type, "state", ev.State, "err", err)
	}
}

// close stops reading and flushes; the error names the events that could
// not be written.
func (w *eventWriter) close() error {
	w.cc.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.out.Flush(); err != nil && w.writeErr == nil {
		w.writeErr = fmt.Errorf("events out: %w", err)
		w.unwritten++
	}
	if w.writeErr != nil {
		return fmt.Errorf("%d event(s) not written, the first: %w", w.unwritten, w.writeErr)
	}
	return nil
}

func (w *eventWriter) result() *Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := w.res
	return &res
}

func (w *eventWriter) count() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res.Events
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
