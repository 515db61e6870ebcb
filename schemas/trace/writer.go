package trace

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Counter is one key of a sample.
type Counter struct {
	Name  string
	Value uint64
}

// Record is one line as a writer holds it: a port reading (Kind "sample")
// or a node's collector restart (Kind "collector_restart", with Time and
// Node only).
type Record struct {
	Kind      string
	Time      time.Time
	Node      string
	Device    string
	Port      int
	Netdev    string
	LinkLayer string
	State     string
	Rate      string
	// Counters, HWCounters and Ethtool are in the order the files are
	// listed and are written in that order; a key that could not be read
	// is absent. nil: the source was not read (no key at all).
	Counters, HWCounters, Ethtool []Counter
	// Config is the port's settings as read with the sample; nil: none
	// read. Its nil fields are unknown and left out.
	Config *schemas.PortConfig
}

// AppendJSON appends the record in trace format v1 (without the newline),
// with the fields in the order of docs/formats.md's examples.
func (s *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, s.Kind)
	b = append(b, `,"ts":"`...)
	b = s.Time.UTC().AppendFormat(b, schemas.TimeLayout)
	b = append(b, `","node":`...)
	b = appendString(b, s.Node)
	if s.Kind == KindCollectorRestart {
		return append(b, '}')
	}
	b = append(b, `,"device":`...)
	b = appendString(b, s.Device)
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(s.Port), 10)
	if s.Netdev != "" {
		b = append(b, `,"netdev":`...)
		b = appendString(b, s.Netdev)
	}
	b = append(b, `,"link_layer":`...)
	b = appendString(b, s.LinkLayer)
	b = append(b, `,"state":`...)
	b = appendString(b, s.State)
	b = append(b, `,"rate":`...)
	b = appendString(b, s.Rate)
	b = appendCounters(b, "counters", s.Counters)
	b = appendCounters(b, "hw_counters", s.HWCounters)
	b = appendCounters(b, "ethtool", s.Ethtool)
	if s.Config != nil {
		b = appendConfig(b, s.Config)
	}
	return append(b, '}')
}

// appendConfig writes the config object with its keys in the order of
// docs/formats.md; an unknown setting is left out, a known empty priority
// list is written [] (on for no priority).
func appendConfig(b []byte, c *schemas.PortConfig) []byte {
	b = append(b, `,"config":{`...)
	n := len(b)
	sep := func() {
		if len(b) > n {
			b = append(b, ',')
		}
	}
	if c.MTU != nil {
		b = append(b, `"mtu":`...)
		b = strconv.AppendInt(b, int64(*c.MTU), 10)
	}
	for _, f := range []struct {
		key string
		v   *[]int
	}{{"pfc_enabled", c.PFCEnabled}, {"ecn_np_enabled", c.ECNNPEnabled}, {"ecn_rp_enabled", c.ECNRPEnabled}} {
		if f.v == nil {
			continue
		}
		sep()
		b = append(b, '"')
		b = append(b, f.key...)
		b = append(b, `":[`...)
		for i, p := range *f.v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(p), 10)
		}
		b = append(b, ']')
	}
	if c.Trust != "" {
		sep()
		b = append(b, `"trust":`...)
		b = appendString(b, c.Trust)
	}
	if c.DSCPPrio != nil {
		sep()
		b = append(b, `"dscp_prio":[`...)
		for i, p := range *c.DSCPPrio {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(p), 10)
		}
		b = append(b, ']')
	}
	for _, f := range []struct {
		key string
		v   *int
	}{{"cnp_dscp", c.CNPDSCP}, {"cnp_802p_prio", c.CNP8021pPrio}, {"traffic_class", c.TrafficClass}} {
		if f.v == nil {
			continue
		}
		sep()
		b = append(b, '"')
		b = append(b, f.key...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(*f.v), 10)
	}
	return append(b, '}')
}

func appendCounters(b []byte, key string, cs []Counter) []byte {
	if cs == nil {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":{`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.Name)
		b = append(b, ':')
		b = strconv.AppendUint(b, c.Value, 10)
	}
	return append(b, '}')
}

// appendString writes a JSON string; names here are plain ASCII, anything
// else is escaped by encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Writer writes records as trace lines, buffered, optionally gzipped.
type Writer struct {
	bw   *bufio.Writer
	zw   *gzip.Writer // nil: plain
	buf  []byte
	line int
}

// NewWriter writes a plain trace to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 1<<16)}
}

// NewGzipWriter writes a gzipped trace to w. The header has no time and the
// level is fixed, so the bytes depend only on the records.
func NewGzipWriter(w io.Writer) *Writer {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression) // the level is valid
	return &Writer{bw: bufio.NewWriterSize(zw, 1<<16), zw: zw}
}

// Write writes one record. A record the reader would refuse is an error
// naming the line it would have been.
func (w *Writer) Write(r *Record) error {
	w.line++
	hasCounters := r.Counters != nil || r.HWCounters != nil || r.Ethtool != nil
	if err := check(r.Kind, r.Node, r.Device, r.Port, hasCounters); err != nil {
		return fmt.Errorf("write trace line %d: %w", w.line, err)
	}
	if err := r.Config.Validate(); err != nil {
		return fmt.Errorf("write trace line %d: %w", w.line, err)
	}
	if y := r.Time.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("write trace line %d: time %s: RFC 3339 has four-digit years", w.line, r.Time)
	}
	w.buf = append(r.AppendJSON(w.buf[:0]), '\n')
	if _, err := w.bw.Write(w.buf); err != nil {
		return fmt.Errorf("write trace line %d: %w", w.line, err)
	}
	return nil
}

// Close flushes and ends the gzip stream; it does not close the
// underlying writer.
func (w *Writer) Close() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	if w.zw != nil {
		if err := w.zw.Close(); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	return nil
}
