package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

func TestParseTraceLine(t *testing.T) {
	tests := []struct {
		name, line, wantErr string
	}{
		{"sample", `{"kind":"sample","ts":"2026-03-14T00:00:00.012Z","node":"a","device":"mlx5_0","port":1,"counters":{"symbol_error":2}}`, ""},
		{"restart", `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"}`, ""},
		{"unknown field ignored", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":2,"ethtool":{"x":1},"future":true}`, ""},
		{"not json", `{"kind":"sample",`, "not a JSON object"},
		{"bad time", `{"kind":"sample","ts":"yesterday","node":"a","device":"d","port":1,"counters":{}}`, `"ts"`},
		{"no node", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","device":"d","port":1,"counters":{}}`, `missing "node"`},
		{"port 0", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":0,"counters":{}}`, "ports count from 1"},
		{"negative counter", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{"x":-1}}`, "not a JSON object"},
		{"float counter", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{"x":1.5}}`, "not a JSON object"},
		{"no counters", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1}`, "without"},
		{"unknown kind", `{"kind":"gauge","ts":"2026-03-14T00:00:00Z","node":"a"}`, "unknown"},
		{"two values", `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"} {}`, "more than one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTraceLine([]byte(tc.line))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseTraceLineTrimsEthtoolNames(t *testing.T) {
	l, err := ParseTraceLine([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"ethtool":{"tx_pause_storm_warning_events ":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.Ethtool["tx_pause_storm_warning_events"] != 3 {
		t.Fatalf("names not trimmed: %v", l.Ethtool)
	}
}

func TestTraceReaderNamesTheLine(t *testing.T) {
	in := `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"}

{"kind":"collector_restart","ts":"2026-03-14T00:00:01Z","node":"a"}
{"kind":"sample","ts":"2026-03-14T00:00:02Z"
`
	r, err := NewTraceReader(strings.NewReader(in), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Next(); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	_, err = r.Next()
	if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "t.jsonl line 4") {
		t.Fatalf("want an error naming line 4, got %v", err)
	}
}

func TestTraceSourceExampleGzip(t *testing.T) {
	raw, err := os.ReadFile("../../shared/examples/trace.jsonl")
	if err != nil {
		t.Skipf("shared example not available: %v", err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for name, data := range map[string][]byte{"plain": raw, "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			r, err := NewTraceReader(bytes.NewReader(data), name)
			if err != nil {
				t.Fatal(err)
			}
			src := NewTraceSource(r)
			ports := 0
			for {
				rd, err := src.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				ports += len(rd.Ports)
			}
			lines := bytes.Count(raw, []byte(`"kind":"sample"`))
			if ports != lines {
				t.Fatalf("%d port readings from %d lines", ports, lines)
			}
		})
	}
}

func TestTraceSourceGroupsScrapes(t *testing.T) {
	in := strings.Join([]string{
		`{"kind":"sample","ts":"2026-03-14T00:00:00.000Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":1}}`,
		`{"kind":"sample","ts":"2026-03-14T00:00:00.003Z","node":"a","device":"mlx5_0","port":2,"counters":{"x":1}}`,
		`{"kind":"sample","ts":"2026-03-14T00:00:00.004Z","node":"b","device":"mlx5_0","port":1,"counters":{"x":1}}`,
		`{"kind":"sample","ts":"2026-03-14T00:00:01.000Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":2}}`,
		`{"kind":"collector_restart","ts":"2026-03-14T00:00:01.500Z","node":"b"}`,
		`{"kind":"sample","ts":"2026-03-14T00:00:02.000Z","node":"b","device":"mlx5_0","port":1,"counters":{"x":2}}`,
	}, "\n")
	r, _ := NewTraceReader(strings.NewReader(in), "t")
	src := NewTraceSource(r)
	var got []string
	for {
		rd, err := src.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		desc := rd.Node
		if rd.Restart {
			desc += "!"
		}
		got = append(got, desc+":"+strings.Repeat("p", len(rd.Ports)))
	}
	want := "a:pp b:p b!: a:p b:p"
	if strings.Join(got, " ") != want {
		t.Fatalf("readings %q, want %q", strings.Join(got, " "), want)
	}
}

func FuzzParseTraceLine(f *testing.F) {
	raw, _ := os.ReadFile("../../shared/examples/trace.jsonl")
	for _, l := range bytes.Split(raw, []byte("\n")) {
		f.Add(l)
	}
	f.Add([]byte(`{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"}`))
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"ethtool":{"a ":1,"a":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseTraceLine(data)
		if err != nil {
			return
		}
		if l.Node == "" || l.Time().IsZero() {
			t.Fatalf("accepted a line without node or time: %q", data)
		}
		if l.Kind == KindSample && (l.Device == "" || l.Port < 1) {
			t.Fatalf("accepted a sample without device/port: %q", data)
		}
	})
}

func TestTraceSourceDeliversPendingBeforeError(t *testing.T) {
	in := `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":1}}
{"kind":"sample","ts":"2026-03-14T00:00:01Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":2}}
{"kind":"sample","ts":"2026-03-14T00:00:02Z","node":"a","device":"mlx5_0","port":"one"}
`
	r, _ := NewTraceReader(strings.NewReader(in), "t")
	src := NewTraceSource(r)
	for i := 0; i < 2; i++ {
		rd, err := src.Next(context.Background())
		if err != nil || len(rd.Ports) != 1 {
			t.Fatalf("reading %d: %v %+v", i, err, rd)
		}
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("want the line-3 error after the pending readings, got %v", err)
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, ErrTrace) {
		t.Fatalf("the error must stick, got %v", err)
	}
}

func TestTraceSourceFlushesInDataTime(t *testing.T) {
	// Node a reports once and goes silent; b keeps reporting. a's scrape
	// must come out as soon as the trace has moved past it, not at the end.
	in := `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":1}}
{"kind":"sample","ts":"2026-03-14T00:00:00.100Z","node":"b","device":"mlx5_0","port":1,"counters":{"x":1}}
{"kind":"sample","ts":"2026-03-14T00:00:05Z","node":"b","device":"mlx5_0","port":1,"counters":{"x":2}}
{"kind":"sample","ts":"2026-03-14T00:00:10Z","node":"b","device":"mlx5_0","port":1,"counters":{"x":3}}
`
	r, _ := NewTraceReader(strings.NewReader(in), "t")
	src := NewTraceSource(r)
	first, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.Node != "a" {
		t.Fatalf("first reading from %s, want the silent node a", first.Node)
	}
	if src.r.Line() != 3 {
		t.Errorf("a's scrape came out after line %d, want 3 (when data time passed it)", src.r.Line())
	}
}
