//go:build !fleet

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestIsTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devNull.Close() })
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	for name, w := range map[string]any{"/dev/null (a character device)": devNull, "file": file, "pipe": pw, "buffer": &bytes.Buffer{}} {
		if isTerminal(w.(interface{ Write([]byte) (int, error) })) {
			t.Errorf("%s: taken for a terminal", name)
		}
	}
	// The master side of a pseudo-terminal is one; without /dev/ptmx
	// (a container without devpts) this half is skipped.
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if !isTerminal(ptmx) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
}

func TestFormatEvidence(t *testing.T) {
	ev := &schemas.Event{Type: schemas.TypePFCStorm, Evidence: map[string]any{
		"tx_pause_fraction": 0.8123, "affected_ports": 3.0, "zzz_other": 7.0, "note": "text is not a figure",
		"rcv_gbps": 12.5, "tx_pause_frames_per_s": 1e6},
		Affected: []schemas.Affected{{Node: "a", Device: "mlx5_0", Port: 1, Hops: 1}}}
	got := formatEvidence(ev)
	want := "evidence: tx_pause_fraction=0.812 tx_pause_frames_per_s=1000000 affected_ports=3 rcv_gbps=12.5 affected=a/mlx5_0/1(1 hop)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if s := formatEvidence(&schemas.Event{Type: "other", Evidence: map[string]any{"b": 2.0, "a": 1.5}}); !strings.HasPrefix(s, "evidence: a=1.5 b=2") {
		t.Errorf("other type: %s", s)
	}
}
