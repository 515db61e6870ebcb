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

	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

func TestTraceSourceTrimsEthtoolNames(t *testing.T) {
	in := `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"ethtool":{"tx_pause_storm_warning_events ":3}}`
	rd, err := NewTraceSource(newTraceReader(t, in)).Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := rd.Ports[0].Ethtool; got["tx_pause_storm_warning_events"] != 3 || len(got) != 1 {
		t.Fatalf("names not trimmed as a host's are: %v", got)
	}
}

// TestTraceSourceCarriesConfig: a sample line's config reaches the reading
// as read (unknown keys nil), and a line without one carries none, so the
// inventory keeps what was known before.
func TestTraceSourceCarriesConfig(t *testing.T) {
	in := `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":4200,"ecn_np_enabled":[]}}
{"kind":"sample","ts":"2026-03-14T00:00:10Z","node":"a","device":"d","port":1,"counters":{}}`
	src := NewTraceSource(newTraceReader(t, in))
	rd, err := src.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := rd.Ports[0].Config
	if c == nil || c.MTU == nil || *c.MTU != 4200 || c.ECNNPEnabled == nil || len(*c.ECNNPEnabled) != 0 || c.PFCEnabled != nil || c.Trust != "" {
		t.Fatalf("config of the first line: %+v", c)
	}
	rd, err = src.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rd.Ports[0].Config != nil {
		t.Fatalf("a line without config read as %+v", rd.Ports[0].Config)
	}
}

func newTraceReader(t *testing.T, in string) *trace.Reader {
	t.Helper()
	r, err := trace.NewReader(strings.NewReader(in), "t")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTraceSourceExampleGzip(t *testing.T) {
	raw, err := os.ReadFile("../test/fixtures/examples/trace.jsonl")
	if err != nil {
		t.Fatalf("the format example: %v", err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for name, data := range map[string][]byte{"plain": raw, "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			r, err := trace.NewReader(bytes.NewReader(data), name)
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
	src := NewTraceSource(newTraceReader(t, in))
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

func TestTraceSourceDeliversPendingBeforeError(t *testing.T) {
	in := `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":1}}
{"kind":"sample","ts":"2026-03-14T00:00:01Z","node":"a","device":"mlx5_0","port":1,"counters":{"x":2}}
{"kind":"sample","ts":"2026-03-14T00:00:02Z","node":"a","device":"mlx5_0","port":"one"}
`
	src := NewTraceSource(newTraceReader(t, in))
	for i := 0; i < 2; i++ {
		rd, err := src.Next(context.Background())
		if err != nil || len(rd.Ports) != 1 {
			t.Fatalf("reading %d: %v %+v", i, err, rd)
		}
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, trace.ErrMalformed) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("want the line-3 error after the pending readings, got %v", err)
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, trace.ErrMalformed) {
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
	src := NewTraceSource(newTraceReader(t, in))
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
