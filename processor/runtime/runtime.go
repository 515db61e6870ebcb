// Package runtime runs the detectors of package processor over the counters
// stream: it consumes the partitions this instance owns from JetStream, keeps
// the per-port state and the watermark in data time, calls the detectors and
// publishes their events.
//
// Determinism: one ordered consumer with one filter per owned partition (a
// single filter, schemas.CountersAllFilter, when the instance owns them all)
// delivers the owned messages in stream order, and one goroutine handles
// them one by one. The same stream therefore gives the same events in the
// same order on every run, across partitions too, and the watermark cannot
// be pushed ahead by one partition being read faster than another.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Stats are a processor's counters; every field is safe to read while it
// runs.
type Stats struct {
	// Processed counts the counters-stream messages handled, including the
	// ones that did not decode.
	Processed    uint64
	DecodeErrors uint64
	Samples      uint64
	// StaleSamples were not newer than their port's last sample: duplicates
	// and out-of-order redeliveries, dropped before the detectors.
	StaleSamples uint64
	// LateSamples arrived behind the watermark: port detectors saw them,
	// fabric detectors may have decided without them.
	LateSamples uint64
	Events      uint64
	// DuplicateEvents were dropped by the events stream's de-duplication.
	DuplicateEvents uint64
	// SuppressedEvents were rebuilt during a warm-up but not re-published.
	SuppressedEvents uint64
	Ports            uint64
}

type stats struct {
	processed, decodeErrors, samples, stale, late, events, dupEvents, suppressed, ports atomic.Uint64
}

// Processor consumes counter batches and publishes incident events.
type Processor struct {
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	owned     []int
	portDets  []processor.PortDetector
	fabDets   []processor.FabricDetector
	fabric    *fabric
	started   atomic.Bool
	st        stats
	startWall time.Time

	// Data-time state of the processing goroutine.
	maxTime   schemas.Millis
	nextTick  schemas.Millis
	nextEvict schemas.Millis
	pending   []*schemas.Event
	intervals intervalEstimator
	// sample is the one being processed: reused, so that handing it to the
	// detectors (through an interface, it escapes) costs no allocation.
	sample processor.Sample
}

// New checks the config and builds the detectors; Run does the work.
func New(js jetstream.JetStream, cfg Config, log *slog.Logger) (*Processor, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dets := cfg.Detectors
	if dets == nil {
		var err error
		if dets, err = processor.NewDetectors(cfg.DetectorNames...); err != nil {
			return nil, err
		}
	}
	p := &Processor{js: js, cfg: cfg, owned: cfg.owned()}
	p.log = log.With("instance", cfg.Instance, "partitions", p.owned)
	p.fabric = newFabric(cfg.Topology, len(p.owned) == cfg.Partitions)
	for _, d := range dets {
		if in, ok := d.(processor.Initializer); ok {
			if err := in.Init(p.fabric); err != nil {
				return nil, fmt.Errorf("detector %s: %w", d.Name(), err)
			}
		}
		pd, isPort := d.(processor.PortDetector)
		fd, isFabric := d.(processor.FabricDetector)
		if !isPort && !isFabric {
			return nil, fmt.Errorf("%w: detector %s implements neither PortDetector nor FabricDetector", ErrInvalidConfig, d.Name())
		}
		if isPort {
			p.portDets = append(p.portDets, pd)
		}
		if isFabric {
			p.fabDets = append(p.fabDets, fd)
		}
	}
	return p, nil
}

// Partitions returns the partitions this processor owns.
func (p *Processor) Partitions() []int { return append([]int(nil), p.owned...) }

// Processed is the number of counters-stream messages handled so far,
// events published included. replay waits for it to reach the number of
// messages in the stream (stream info State.Msgs, summed over instances).
func (p *Processor) Processed() uint64 { return p.st.processed.Load() }

// Stats returns the processor's counters.
func (p *Processor) Stats() Stats {
	return Stats{
		Processed:        p.st.processed.Load(),
		DecodeErrors:     p.st.decodeErrors.Load(),
		Samples:          p.st.samples.Load(),
		StaleSamples:     p.st.stale.Load(),
		LateSamples:      p.st.late.Load(),
		Events:           p.st.events.Load(),
		DuplicateEvents:  p.st.dupEvents.Load(),
		SuppressedEvents: p.st.suppressed.Load(),
		Ports:            p.st.ports.Load(),
	}
}

var partitionsInTransform = regexp.MustCompile(`partition\((\d+)`)

// Run consumes until ctx is cancelled (then it returns nil) or the stream is
// unusable. It may be called once.
func (p *Processor) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("processor: Run called twice")
	}
	stream, err := p.js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		return fmt.Errorf("counters stream: %w", err)
	}
	if tr := stream.CachedInfo().Config.SubjectTransform; tr != nil {
		if m := partitionsInTransform.FindStringSubmatch(tr.Destination); m != nil {
			if n, _ := strconv.Atoi(m[1]); n != p.cfg.Partitions {
				return fmt.Errorf("%w: the counters stream has %d partitions, config says %d", ErrInvalidConfig, n, p.cfg.Partitions)
			}
		}
	}

	// No fixed consumer name: an ordered consumer of a previous run (or of
	// the old process in a rolling restart) may still exist on the server,
	// and reusing its name would hand us its cursor.
	occ := jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Metadata:      map[string]string{"rdmawatch": fmt.Sprintf("%s instance %d", p.cfg.Name, p.cfg.Instance)},
	}
	if len(p.owned) == p.cfg.Partitions {
		occ.FilterSubjects = []string{schemas.CountersAllFilter}
	} else {
		for _, part := range p.owned {
			occ.FilterSubjects = append(occ.FilterSubjects, schemas.CountersPartitionFilter(part))
		}
	}
	p.startWall = time.Now()
	if p.cfg.Start == StartWarmUp {
		from := p.cfg.StartTime
		if from.IsZero() {
			from = p.startWall.Add(-p.cfg.WarmUp)
		}
		occ.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		occ.OptStartTime = &from
	}
	cons, err := p.js.OrderedConsumer(ctx, schemas.StreamCounters, occ)
	if err != nil {
		return fmt.Errorf("counters consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("counters consumer: %w", err)
	}
	defer it.Stop()
	p.log.Info("processor started", "filters", occ.FilterSubjects, "start", occ.DeliverPolicy.String())

	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("counters consumer: %w", err)
			}
			// The ordered consumer recreates itself after gaps and
			// server restarts; anything left is transient.
			p.log.Warn("counters consumer", "err", err)
			if !waitCtx(ctx, 200*time.Millisecond) {
				return nil
			}
			continue
		}
		if err := p.handle(ctx, msg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// handle processes one message: decode, detectors, publish, count.
func (p *Processor) handle(ctx context.Context, msg jetstream.Msg) error {
	var seq uint64
	var stored time.Time
	if meta, err := msg.Metadata(); err == nil {
		seq, stored = meta.Sequence.Stream, meta.Timestamp
	}
	batch, err := schemas.DecodeBatch(msg.Data())
	if err != nil {
		// A poison message must not stop the fleet's detection: log it
		// with what is needed to find it, and go on.
		p.st.decodeErrors.Add(1)
		p.log.Warn("skipping undecodable counters message", "stream_seq", seq, "subject", msg.Subject(), "err", err)
		p.st.processed.Add(1)
		return nil
	}
	p.pending = p.pending[:0]
	p.process(ctx, batch)
	quiet := p.cfg.Start == StartWarmUp && stored.Before(p.startWall.Add(-p.cfg.ResendWindow))
	for _, ev := range p.pending {
		if quiet {
			p.st.suppressed.Add(1)
			continue
		}
		if err := p.publish(ctx, ev); err != nil {
			return err
		}
	}
	p.pending = p.pending[:0]
	p.st.processed.Add(1)
	return nil
}

// process runs the detectors over one batch.
func (p *Processor) process(ctx context.Context, b *schemas.CounterBatch) {
	// The counters are added once per batch: an atomic add per sample costs
	// more than the bookkeeping it does.
	var samples, stale, late uint64
	for i := range b.Ports {
		ps := &b.Ports[i]
		t := schemas.Millis(ps.TimeMs)
		if t == 0 {
			t = schemas.Millis(b.TimeMs)
		}
		id := schemas.PortID{Node: b.Node, Device: ps.Device, Port: ps.Port}
		port, known := p.fabric.ports[id]
		if !known {
			port = p.fabric.get(id)
			p.st.ports.Store(uint64(len(p.fabric.ports)))
		}
		if port.Samples > 0 && t <= port.LastTime {
			stale++
			continue
		}
		samples++
		if t < p.fabric.wm {
			late++
		}
		p.sample = processor.Sample{ID: id, Time: t, PortSample: ps}
		s := &p.sample
		for _, d := range p.portDets {
			d.OnSample(ctx, port, s, (*emitter)(p))
		}
		port.Observe(s)
		p.intervals.observe(ps.IntervalMs)
		p.maxTime = max(p.maxTime, t)
	}
	p.sample = processor.Sample{} // keep no reference to the batch
	if samples > 0 {
		p.st.samples.Add(samples)
	}
	if stale > 0 {
		p.st.stale.Add(stale)
	}
	if late > 0 {
		p.st.late.Add(late)
	}
	p.advance(ctx)
}

// advance moves the watermark and runs what hangs on it.
func (p *Processor) advance(ctx context.Context) {
	wm := p.maxTime - p.lateness()
	if wm <= p.fabric.wm {
		return
	}
	p.fabric.wm = wm
	if wm >= p.nextTick {
		for _, d := range p.fabDets {
			d.OnWatermark(ctx, p.fabric, wm, (*emitter)(p))
		}
		p.nextTick = wm + p.tick()
	}
	if wm >= p.nextEvict {
		if p.nextEvict != 0 {
			if n := p.fabric.evict(wm - schemas.Millis(p.cfg.PortTTL.Milliseconds())); n > 0 {
				p.log.Info("forgot silent ports", "ports", n, "watermark", wm)
				p.st.ports.Store(uint64(len(p.fabric.ports)))
			}
		}
		p.nextEvict = wm + schemas.Millis(time.Minute.Milliseconds())
	}
}

// emitter is the processor.Emitter the detectors get: events wait until the
// message that caused them is processed. Not exported: only the processing
// goroutine may emit.
type emitter Processor

func (e *emitter) Emit(ev *schemas.Event) {
	p := (*Processor)(e)
	if err := ev.Validate(); err != nil {
		p.log.Error("detector emitted an invalid event; dropped", "type", ev.Type, "err", err)
		return
	}
	p.pending = append(p.pending, ev)
}

// publish sends one event, retrying until it is stored or ctx ends: an
// event decided is never dropped, and a retry that did reach the stream is
// dropped there by its Nats-Msg-Id.
func (p *Processor) publish(ctx context.Context, ev *schemas.Event) error {
	data, err := schemas.EncodeEvent(ev)
	if err != nil {
		p.log.Error("cannot encode event; dropped", "id", ev.ID, "err", err)
		return nil
	}
	subject := schemas.EventSubject(ev)
	backoff := 100 * time.Millisecond
	for {
		ack, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(ev.MsgID()))
		if err == nil {
			if ack.Duplicate {
				p.st.dupEvents.Add(1)
			} else {
				p.st.events.Add(1)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("publish event; retrying", "id", ev.MsgID(), "err", err, "backoff", backoff)
		if !waitCtx(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// waitCtx waits d of wall time for an I/O retry; false if ctx ended first.
func waitCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
