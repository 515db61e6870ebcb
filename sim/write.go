package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// Generate runs the fleet to the end, streaming trace lines to out and
// writing the labels (ground truth of the injected faults) to labels at the
// end. labels may be nil.
func Generate(cfg Config, out io.Writer, labels io.Writer) (*Summary, error) {
	return writeTrace(cfg, trace.NewWriter(out), labels)
}

func writeTrace(cfg Config, w *trace.Writer, labels io.Writer) (*Summary, error) {
	f, err := NewFleet(cfg)
	if err != nil {
		return nil, err
	}
	for {
		_, lines, ok := f.Step()
		if !ok {
			break
		}
		for i := range lines {
			if err := w.Write(lines[i].Record()); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
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
	var topo, tr, labels bytes.Buffer
	if err := WriteTopology(cfg, &topo); err != nil {
		return nil, nil, err
	}
	w, name := trace.NewWriter(&tr), "trace.jsonl"
	if gz {
		// The gzip writer's bytes depend only on the trace.
		w, name = trace.NewGzipWriter(&tr), "trace.jsonl.gz"
	}
	sum, err := writeTrace(cfg, w, &labels)
	if err != nil {
		return nil, nil, err
	}
	return map[string][]byte{"topology.json": topo.Bytes(), "labels.jsonl": labels.Bytes(), name: tr.Bytes()}, sum, nil
}
