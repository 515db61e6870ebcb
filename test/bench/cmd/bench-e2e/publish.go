package main

import (
	"context"
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
// right here. Tick n has data time start+n*interval; its nodes are
// published in slices spread over the interval, as collectors on
// independent timers would.
type generator struct {
	js        jetstream.JetStream
	nodes     []string
	tt        []templateTick
	interval  time.Duration
	slices    int
	start     time.Time // wall time, and data time, of tick 0
	flapEvery int       // ticks between flaps; 0: none
	flapAfter int       // first tick that may carry a flap

	published  atomic.Uint64 // port samples handed to the client
	messages   atomic.Uint64
	pubErrors  atomic.Uint64
	worstBehnd atomic.Int64 // ns, largest since the last take

	mu       sync.Mutex
	releases [][]time.Time // [tick][slice]
	flaps    []flap
	flapped  map[string]bool
	firstErr error
}

func newGenerator(nc *nats.Conn, nodes []string, tt []templateTick, interval time.Duration, slices int, start time.Time, flapEvery, flapAfter int) (*generator, error) {
	g := &generator{nodes: nodes, tt: tt, interval: interval, slices: max(1, slices), start: start,
		flapEvery: flapEvery, flapAfter: flapAfter, flapped: map[string]bool{}}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(8192),
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

// run publishes tick after tick until ctx ends.
func (g *generator) run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for n := 0; ; n++ {
		tmpl := &g.tt[n%len(g.tt)]
		shift := g.start.UnixMilli() + int64(n)*g.interval.Milliseconds() - tmpl.at
		flapAt := -1
		if g.flapEvery > 0 && n >= g.flapAfter && (n-g.flapAfter)%g.flapEvery == 0 && len(tmpl.batches) > 0 {
			flapAt = (n * 7919) % len(tmpl.batches) // a different node, and partition, each time
		}
		rel := make([]time.Time, g.slices)
		for s := range g.slices {
			due := g.start.Add(time.Duration(n)*g.interval + time.Duration(s)*g.interval/time.Duration(g.slices))
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return nil
				case <-timer.C:
				}
			} else if ctx.Err() != nil {
				return nil
			}
			now := time.Now()
			g.behind(now.Sub(due))
			g.mu.Lock()
			if s == 0 {
				g.releases = append(g.releases, rel)
			}
			rel[s] = now
			g.mu.Unlock()
			for i := range tmpl.batches {
				tm := &tmpl.batches[i]
				if tm.node%g.slices != s {
					continue
				}
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
				if _, err := g.js.PublishMsgAsync(m); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("publish %s: %w", tm.subject, err)
				}
				g.published.Add(uint64(tm.ports))
				g.messages.Add(1)
			}
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

// released is when the reading of the node (its slice) holding data time
// ms was published; for a fabric event (no node) the last slice of that
// tick: all of the tick's data was out by then.
func (g *generator) released(node string, ms int64, nodeIndex map[string]int) (time.Time, bool) {
	n := int((ms - g.start.UnixMilli()) / g.interval.Milliseconds())
	s := g.slices - 1
	if i, ok := nodeIndex[node]; ok {
		s = i % g.slices
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n < 0 || n >= len(g.releases) || g.releases[n][s].IsZero() {
		return time.Time{}, false
	}
	return g.releases[n][s], true
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
