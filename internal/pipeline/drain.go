package pipeline

import (
	"context"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// drainStable is how many polls in a row must find the pipeline drained: a
// processor may publish an event just after it counted its message.
const drainStable = 3

// waitDrained polls until the processors have handled every counters
// message and every event on the stream was written.
func (p *Pipeline) waitDrained(ctx context.Context) error {
	stable := 0
	for stable < drainStable {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		done, err := p.drained(ctx)
		if err != nil {
			return err
		}
		if done {
			stable++
		} else {
			stable = 0
		}
	}
	return nil
}

func (p *Pipeline) drained(ctx context.Context) (bool, error) {
	counters, err := p.streamMsgs(ctx, schemas.StreamCounters)
	if err != nil {
		return false, err
	}
	var processed uint64
	for _, proc := range p.procs {
		processed += proc.Processed()
	}
	if processed < counters {
		return false, nil
	}
	events, err := p.streamMsgs(ctx, schemas.StreamEvents)
	if err != nil {
		return false, err
	}
	return p.events.seen.Load() >= events, nil
}

func (p *Pipeline) streamMsgs(ctx context.Context, name string) (uint64, error) {
	s, err := p.js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}
