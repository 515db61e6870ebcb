package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Generate runs the fleet to the end, streaming trace lines to trace and
// writing the labels (ground truth of the injected faults) to labels at the
// end. labels may be nil.
func Generate(cfg Config, trace io.Writer, labels io.Writer) (*Summary, error) {
	f, err := NewFleet(cfg)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(trace, 1<<16)
	var buf []byte
	for {
		_, lines, ok := f.Step()
		if !ok {
			break
		}
		for i := range lines {
			buf = lines[i].AppendJSON(buf[:0])
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return nil, fmt.Errorf("write trace: %w", err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write trace: %w", err)
	}
	if labels != nil {
		if err := WriteLabels(labels, f.Labels()); err != nil {
			return nil, err
		}
	}
	sum := f.Summary()
	return &sum, nil
}

// WriteLabels writes labels format v1, one JSON object per line.
func WriteLabels(w io.Writer, labels []Label) error {
	for _, l := range labels {
		b, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("write labels: %w", err)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("write labels: %w", err)
		}
	}
	return nil
}

// WriteFiles writes a scenario directory: trace.jsonl (trace.jsonl.gz when
// gz is set), topology.json and labels.jsonl.
func WriteFiles(cfg Config, dir string, gz bool) (*Summary, error) {
	files, sum, err := Files(cfg, gz)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stale := map[bool]string{true: "trace.jsonl", false: "trace.jsonl.gz"}[gz]
	if err := os.Remove(filepath.Join(dir, stale)); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

// Files renders a scenario directory in memory: file name -> content.
func Files(cfg Config, gz bool) (map[string][]byte, *Summary, error) {
	var topo, trace, labels bytes.Buffer
	if err := WriteTopology(cfg, &topo); err != nil {
		return nil, nil, err
	}
	sum, err := Generate(cfg, &trace, &labels)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{"topology.json": topo.Bytes(), "labels.jsonl": labels.Bytes()}
	if gz {
		// A zero header time and a fixed level: the bytes depend only on
		// the trace.
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		if _, err := zw.Write(trace.Bytes()); err != nil {
			return nil, nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, nil, err
		}
		files["trace.jsonl.gz"] = z.Bytes()
	} else {
		files["trace.jsonl"] = trace.Bytes()
	}
	return files, sum, nil
}

// AppendJSON appends the line in trace format v1, with the fields in the
// order of DESIGN.md's examples.
func (s *Sample) AppendJSON(b []byte) []byte {
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
// else is escaped.
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
