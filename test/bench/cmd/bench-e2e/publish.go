package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// flap is a link flap the generator injected: the port, the data time of
// the reading that carries it, and when that reading was published.
type flap struct {
	node, device string
	port         int
	dataMs       int64
	released     time.Time
}

// generator publishes the fleet's template batches, re-timed, at the
// collection interval in wall time: the load generator, so wall time is
// right here. Tick n has data time start+n*interval; each node's batch
// keeps its offset in the round (the simulated hosts read at slightly
// different moments) and is published at its data time.
type generator struct {
	js        jetstream.JetStream
	nodes     []string
	tt        []templateTick
	interval  time.Duration
	start     time.Time // wall time, and data time, of tick 0
	flapEvery int       // ticks between flaps; 0: none
	flapAfter int       // first tick that may carry a flap

	published  atomic.Uint64 // port samples handed to the client
	messages   atomic.Uint64
	pubErrors  atomic.Uint64
	stalls     atomic.Uint64 // publishes that waited more than an interval for room
	worstBehnd atomic.Int64  // ns, largest since the last take

	mu       sync.Mutex
	flaps    []flap
	flapped  map[string]bool
	firstErr error
}

func newGenerator(nc *nats.Conn, nodes []string, tt []templateTick, interval time.Duration, start time.Time, flapEvery, flapAfter int) (*generator, error) {
	g := &generator{nodes: nodes, tt: tt, interval: interval, start: start,
		flapEvery: flapEvery, flapAfter: flapAfter, flapped: map[string]bool{}}
	js, err := jetstream.New(nc,
		// Thousands of collectors publish at once on a real fleet, each
		// with its own bound: allow two rounds in flight before stalling.
		jetstream.WithPublishAsyncMaxPending(max(4096, 2*len(nodes))),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			g.pubErrors.Add(1)
			g.mu.Lock()
			if g.firstErr == nil {
				g.firstErr = fmt.Errorf("publish %s: %w", m.Subject, err)
			}
			g.mu.Unlock()
		}))
	if err != nil {
		return nil, err
	}
	g.js = js
	return g, nil
}

// run publishes tick after tick until ctx ends. A node's batch goes out
// at its own data time (its collector publishes right after reading), so
// data time and wall time are the same clock here.
func (g *generator) run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for n := 0; ; n++ {
		tmpl := &g.tt[n%len(g.tt)]
		tickStart := g.start.Add(time.Duration(n) * g.interval)
		shift := tickStart.UnixMilli() - tmpl.at
		flapAt := -1
		if g.flapEvery > 0 && n >= g.flapAfter && (n-g.flapAfter)%g.flapEvery == 0 && len(tmpl.batches) > 0 {
			flapAt = (n * 7919) % len(tmpl.batches) // a different node, and partition, each time
		}
		for i := range tmpl.batches {
			tm := &tmpl.batches[i]
			due := tickStart.Add(tm.offset)
			// Batches due within a few milliseconds go together: a timer
			// per batch would cost more than the publishing.
			if d := time.Until(due); d > 2*time.Millisecond {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return nil
				case <-timer.C:
				}
			} else if ctx.Err() != nil {
				return nil
			}
			g.behind(time.Since(due))
			seq := uint64(n)
			var data []byte
			if i == flapAt {
				var err error
				if data, err = g.flap(tm, shift, seq, n); err != nil {
					return err
				}
			} else {
				data = tm.retime(nil, shift, seq) // a fresh buffer: the client keeps the message until its ack
			}
			m := &nats.Msg{Subject: tm.subject, Data: data, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, tm.msgID(seq))
			// A stall (two rounds unacknowledged) is the broker not taking
			// the load: wait for it, which shows as the generator behind
			// its schedule, and the verdict says so.
			for {
				_, err := g.js.PublishMsgAsync(m, jetstream.WithStallWait(max(g.interval, time.Second)))
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return nil
				}
				if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
					return fmt.Errorf("publish %s: %w", tm.subject, err)
				}
				g.stalls.Add(1)
			}
			g.published.Add(uint64(tm.ports))
			g.messages.Add(1)
		}
	}
}

// flap encodes the batch with a link flap on a port not flapped before
// and records it.
func (g *generator) flap(tm *template, shift int64, seq uint64, n int) ([]byte, error) {
	for k := range tm.ports {
		port := (n + k) % tm.ports
		data, p, err := tm.withFlap(shift, seq, port)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("%s/%s/%d", g.nodes[tm.node], p.Device, p.Port)
		g.mu.Lock()
		seen := g.flapped[key]
		if !seen {
			g.flapped[key] = true
			g.flaps = append(g.flaps, flap{node: g.nodes[tm.node], device: p.Device, port: p.Port, dataMs: p.TimeMs, released: time.Now()})
		}
		g.mu.Unlock()
		if !seen {
			return data, nil
		}
	}
	return tm.retime(nil, shift, seq), nil // every port of the node flapped already
}

func (g *generator) behind(d time.Duration) {
	for {
		w := g.worstBehnd.Load()
		if int64(d) <= w || g.worstBehnd.CompareAndSwap(w, int64(d)) {
			return
		}
	}
}

// wait blocks until every async publish was acknowledged or ctx ends.
func (g *generator) wait(ctx context.Context) error {
	select {
	case <-g.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d publishes not acknowledged: %w", g.js.PublishAsyncPending(), ctx.Err())
	}
}
