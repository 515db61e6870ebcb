package collector

import (
	"context"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// TraceSource replays a trace as readings, grouping each node's consecutive
// port lines into one scrape: a node's reading is complete when one of its
// ports shows up again, a collector_restart line arrives, the trace's data
// time moves past it, or the trace ends.
// It implements Source.
type TraceSource struct {
	r       *trace.Reader
	pending map[string]*Reading
	order   []string // nodes with a pending reading, oldest first
	ready   []*Reading
	done    bool
	err     error // the error that ended reading, returned once ready is drained
}

// NewTraceSource replays r.
func NewTraceSource(r *trace.Reader) *TraceSource {
	return &TraceSource{r: r, pending: make(map[string]*Reading)}
}

// Next implements Source.
func (s *TraceSource) Next(ctx context.Context) (*Reading, error) {
	for len(s.ready) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.done {
			return nil, s.err
		}
		l, err := s.r.Next()
		if err != nil {
			// The end, or a malformed line: either way the scrapes read so
			// far are complete and go out before the error does.
			s.done, s.err = true, err
			for _, n := range s.order {
				s.ready = append(s.ready, s.pending[n])
			}
			s.order, s.pending = nil, nil
			continue
		}
		s.add(l)
	}
	r := s.ready[0]
	s.ready = s.ready[1:]
	return r, nil
}

func (s *TraceSource) flush(node string) {
	r, ok := s.pending[node]
	if !ok {
		return
	}
	delete(s.pending, node)
	for i, n := range s.order {
		if n == node {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	s.ready = append(s.ready, r)
}

// scrapeSpread is how far apart in data time the lines of one scrape of a
// node can be. A node's reading is complete once the trace has moved this
// far past it: a node that goes silent must not have its last scrape held
// back until the trace ends. A port line arriving later still is not lost;
// it starts the node's next reading.
const scrapeSpread = time.Second

func (s *TraceSource) add(l *trace.Line) {
	for len(s.order) > 0 && s.pending[s.order[0]].Time.Add(scrapeSpread).Before(l.Time()) {
		s.flush(s.order[0])
	}
	if l.Kind == trace.KindCollectorRestart {
		s.flush(l.Node)
		s.ready = append(s.ready, &Reading{Node: l.Node, Time: l.Time(), Restart: true})
		return
	}
	r := s.pending[l.Node]
	if r != nil {
		for _, p := range r.Ports {
			if p.Device == l.Device && p.Port == l.Port {
				s.flush(l.Node)
				r = nil
				break
			}
		}
	}
	if r == nil {
		r = &Reading{Node: l.Node, Time: l.Time()}
		s.pending[l.Node] = r
		s.order = append(s.order, l.Node)
	}
	ethtool := l.Ethtool
	if ethtool != nil {
		// As read from a host: names trimmed.
		ethtool = trimEthtoolStatNames(ethtool)
	}
	// A restart marker just emitted for this node must apply before these
	// ports; it was queued first, so order is kept.
	r.Ports = append(r.Ports, PortReading{
		Device:     l.Device,
		Port:       l.Port,
		Netdev:     l.Netdev,
		LinkLayer:  l.LinkLayer,
		State:      parsePortState(l.State),
		Rate:       l.Rate,
		Time:       l.Time(),
		Counters:   l.Counters,
		HWCounters: l.HWCounters,
		Ethtool:    ethtool,
		Config:     l.Config,
	})
	if l.Time().After(r.Time) {
		r.Time = l.Time()
	}
}
