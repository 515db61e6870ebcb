package collector

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrTrace wraps every malformed-trace error; the message names the line.
var ErrTrace = errors.New("malformed trace")

// Trace line kinds (trace format v1).
const (
	KindSample           = "sample"
	KindCollectorRestart = "collector_restart"
)

// TraceLine is one line of a trace, format v1 (DESIGN.md).
type TraceLine struct {
	Kind       string            `json:"kind"`
	TS         string            `json:"ts"`
	Node       string            `json:"node"`
	Device     string            `json:"device,omitempty"`
	Port       int               `json:"port,omitempty"`
	Netdev     string            `json:"netdev,omitempty"`
	LinkLayer  string            `json:"link_layer,omitempty"`
	State      string            `json:"state,omitempty"`
	Rate       string            `json:"rate,omitempty"`
	Counters   map[string]uint64 `json:"counters,omitempty"`
	HWCounters map[string]uint64 `json:"hw_counters,omitempty"`
	Ethtool    map[string]uint64 `json:"ethtool,omitempty"`

	time time.Time
}

// Time is the parsed ts.
func (l *TraceLine) Time() time.Time { return l.time }

// ParseTraceLine parses and validates one line. The error says what is wrong,
// not where: the reader adds the line number.
func ParseTraceLine(data []byte) (*TraceLine, error) {
	var l TraceLine
	// Unmarshal checks the line holds exactly one JSON value, and skips the
	// Decoder's own buffering: this is replay's hottest loop.
	if err := json.Unmarshal(data, &l); err != nil {
		if strings.Contains(err.Error(), "after top-level value") {
			return nil, errors.New("more than one JSON value on the line")
		}
		return nil, fmt.Errorf("not a JSON object of trace format v1: %v", err)
	}
	if l.TS == "" {
		return nil, errors.New(`missing "ts"`)
	}
	t, err := schemas.ParseTime(l.TS)
	if err != nil {
		return nil, fmt.Errorf(`"ts": %v`, err)
	}
	l.time = t
	if l.Node == "" {
		return nil, errors.New(`missing "node"`)
	}
	switch l.Kind {
	case KindCollectorRestart:
	case KindSample:
		if l.Device == "" {
			return nil, errors.New(`sample without "device"`)
		}
		if l.Port < 1 {
			return nil, fmt.Errorf(`sample "port" %d: ports count from 1`, l.Port)
		}
		if l.Counters == nil && l.HWCounters == nil && l.Ethtool == nil {
			return nil, errors.New(`sample without "counters", "hw_counters" or "ethtool"`)
		}
		if l.Ethtool != nil {
			l.Ethtool = trimEthtoolStatNames(l.Ethtool)
		}
	case "":
		return nil, errors.New(`missing "kind"`)
	default:
		return nil, fmt.Errorf(`unknown "kind" %q (want %q or %q)`, l.Kind, KindSample, KindCollectorRestart)
	}
	return &l, nil
}

// TraceReader reads trace lines with line numbers.
type TraceReader struct {
	sc     *bufio.Scanner
	closer io.Closer
	name   string
	line   int
}

// OpenTrace opens a trace file; a .gz file (or any gzip stream) is read as gzip.
func OpenTrace(path string) (*TraceReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	tr, err := NewTraceReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	tr.closer = multiCloser{tr.closer, f}
	return tr, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// NewTraceReader reads a trace from r; name is used in error messages.
func NewTraceReader(r io.Reader, name string) (*TraceReader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var closer io.Closer
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		closer = zr
		r = zr
	} else {
		r = br
	}
	sc := bufio.NewScanner(r)
	// A sample with a full ethtool set is a few KiB; allow generous lines.
	sc.Buffer(make([]byte, 0, 1<<16), 4<<20)
	return &TraceReader{sc: sc, closer: closer, name: name}, nil
}

// Next returns the next line, io.EOF at the end, or an error wrapping
// ErrTrace that names the file and line.
func (t *TraceReader) Next() (*TraceLine, error) {
	for t.sc.Scan() {
		t.line++
		data := bytes.TrimSpace(t.sc.Bytes())
		if len(data) == 0 {
			continue
		}
		l, err := ParseTraceLine(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrTrace, t.name, t.line, err)
		}
		return l, nil
	}
	if err := t.sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s after line %d: %v", ErrTrace, t.name, t.line, err)
	}
	return nil, io.EOF
}

// Line is the number of the last line read.
func (t *TraceReader) Line() int { return t.line }

// Close closes the underlying file.
func (t *TraceReader) Close() error {
	if t.closer == nil {
		return nil
	}
	return t.closer.Close()
}

// TraceSource replays a trace as readings, grouping each node's consecutive
// port lines into one scrape: a node's reading is complete when one of its
// ports shows up again, a collector_restart line arrives, the trace's data
// time moves past it, or the trace ends.
// It implements Source.
type TraceSource struct {
	r       *TraceReader
	pending map[string]*Reading
	order   []string // nodes with a pending reading, oldest first
	ready   []*Reading
	done    bool
	err     error // the error that ended reading, returned once ready is drained
}

// NewTraceSource replays r.
func NewTraceSource(r *TraceReader) *TraceSource {
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

func (s *TraceSource) add(l *TraceLine) {
	for len(s.order) > 0 && s.pending[s.order[0]].Time.Add(scrapeSpread).Before(l.Time()) {
		s.flush(s.order[0])
	}
	if l.Kind == KindCollectorRestart {
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
		Ethtool:    l.Ethtool,
	})
	if l.Time().After(r.Time) {
		r.Time = l.Time()
	}
}
