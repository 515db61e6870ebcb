package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, line, wantErr string
	}{
		{"sample", `{"kind":"sample","ts":"2026-03-14T00:00:00.012Z","node":"a","device":"mlx5_0","port":1,"counters":{"symbol_error":2}}`, ""},
		{"restart", `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"}`, ""},
		{"unknown field ignored", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":2,"ethtool":{"x":1},"future":true}`, ""},
		{"not json", `{"kind":"sample",`, "not a JSON object"},
		{"bad time", `{"kind":"sample","ts":"yesterday","node":"a","device":"d","port":1,"counters":{}}`, `"ts"`},
		{"no time", `{"kind":"sample","node":"a","device":"d","port":1,"counters":{}}`, `missing "ts"`},
		{"no node", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","device":"d","port":1,"counters":{}}`, `missing "node"`},
		{"no device", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","port":1,"counters":{}}`, `without "device"`},
		{"port 0", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":0,"counters":{}}`, `"port" 0: want 1-65535`},
		{"port 65536", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":65536,"counters":{}}`, `"port" 65536: want 1-65535`},
		{"port 65535", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":65535,"counters":{}}`, ""},
		{"negative counter", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{"x":-1}}`, "not a JSON object"},
		{"float counter", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{"x":1.5}}`, "not a JSON object"},
		{"no counters", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1}`, "without"},
		{"no kind", `{"ts":"2026-03-14T00:00:00Z","node":"a"}`, `missing "kind"`},
		{"unknown kind", `{"kind":"gauge","ts":"2026-03-14T00:00:00Z","node":"a"}`, "unknown"},
		{"two values", `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"} {}`, "more than one"},
		{"config", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":4200,"pfc_enabled":[3],"ecn_np_enabled":[],"ecn_rp_enabled":[3],"trust":"dscp"}}`, ""},
		{"config unknown key ignored", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":9000,"buffer_size":[1,2]}}`, ""},
		{"config on a restart ignored", `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a","config":{"mtu":1}}`, ""},
		{"config mtu not a number", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":"9000"}}`, "config.mtu"},
		{"config mtu too small", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":12}}`, `"config": config mtu 12`},
		{"config priority 8", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"pfc_enabled":[8]}}`, "pfc_enabled: priority 8"},
		{"config np not a list", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"ecn_np_enabled":3}}`, "config.ecn_np_enabled"},
		{"config bad trust", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"trust":"vlan"}}`, `trust "vlan"`},
		{"config not an object", `{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":[]}`, "config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.line))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestReaderNamesTheLine(t *testing.T) {
	in := `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"a"}

{"kind":"collector_restart","ts":"2026-03-14T00:00:01Z","node":"a"}
{"kind":"sample","ts":"2026-03-14T00:00:02Z"
`
	for name, data := range map[string][]byte{"plain": []byte(in), "gzip": gzipped(t, []byte(in))} {
		t.Run(name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(data), "t.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := r.Next(); err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
			}
			_, err = r.Next()
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "t.jsonl line 4") || r.Line() != 4 {
				t.Fatalf("want an error naming line 4, got %v (at line %d)", err, r.Line())
			}
		})
	}
}

func TestReaderRefusesOverlongLineAndBrokenGzip(t *testing.T) {
	long := `{"kind":"collector_restart","ts":"2026-03-14T00:00:00Z","node":"` + strings.Repeat("a", MaxLineBytes) + `"}`
	r, err := NewReader(strings.NewReader(long), "long")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "after line 0") {
		t.Errorf("overlong line: %v", err)
	}
	if _, err := NewReader(bytes.NewReader([]byte{0x1f, 0x8b, 0}), "gz"); !errors.Is(err, ErrMalformed) {
		t.Errorf("broken gzip header: %v", err)
	}
}

var records = []Record{
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 0, 12e6, time.UTC), Node: "host-a", Device: "mlx5_0", Port: 1,
		Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
		Counters: []Counter{{"symbol_error", 2}, {"port_xmit_data", 1 << 62}}, HWCounters: []Counter{{"lifespan", 10}},
		Ethtool: []Counter{{"rx_bits_phy", 5}}},
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 1, 0, time.UTC), Node: "ib-7", Device: "mlx5_1", Port: 2,
		LinkLayer: "InfiniBand", State: "ACTIVE", Rate: "400 Gb/sec (4X NDR)", Counters: []Counter{}},
	{Kind: KindCollectorRestart, Time: time.Date(2026, 3, 14, 0, 0, 6, 5e8, time.UTC), Node: `odd"name ünïcode`},
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 7, 0, time.FixedZone("x", 3600)), Node: "n", Device: "d\\evil", Port: 65535,
		Ethtool: []Counter{{"tx_prio3_pause ", 1}, {"\x01ctl", 0}}},
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 8, 0, time.UTC), Node: "gpu-017", Device: "mlx5_0", Port: 1,
		Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", Counters: []Counter{{"symbol_error", 0}},
		Config: &schemas.PortConfig{MTU: ptr(4200), PFCEnabled: ptr([]int{3}), ECNNPEnabled: ptr([]int(nil)), Trust: "dscp"}},
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 9, 0, time.UTC), Node: "gpu-017", Device: "mlx5_0", Port: 1,
		Counters: []Counter{}, Config: &schemas.PortConfig{ECNRPEnabled: ptr([]int{3, 4})}},
	// The settings that decide the CNPs' priority, and a RoCE LAG member.
	{Kind: KindSample, Time: time.Date(2026, 3, 14, 0, 0, 10, 0, time.UTC), Node: "gpu-018", Device: "mlx5_bond_0.ens1f0np0", Port: 1,
		Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "100 Gb/sec", Ethtool: []Counter{{"rx_corrected_bits_phy", 7}},
		Config: &schemas.PortConfig{Trust: "dscp", DSCPPrio: ptr(dscpByEight()), CNPDSCP: ptr(48), CNP8021pPrio: ptr(6), TrafficClass: ptr(106)}},
}

// dscpByEight is a DSCP-to-priority map that sends DSCP d to priority d/8.
func dscpByEight() []int {
	m := make([]int, schemas.NumDSCP)
	for d := range m {
		m[d] = d / 8
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// TestFieldOrder pins the bytes of docs/formats.md's examples.
func TestFieldOrder(t *testing.T) {
	want := `{"kind":"sample","ts":"2026-03-14T00:00:00.012Z","node":"host-a","device":"mlx5_0","port":1,"netdev":"ens1f0np0","link_layer":"Ethernet","state":"ACTIVE","rate":"200 Gb/sec (4X HDR)","counters":{"symbol_error":2,"port_xmit_data":4611686018427387904},"hw_counters":{"lifespan":10},"ethtool":{"rx_bits_phy":5}}`
	if got := string(records[0].AppendJSON(nil)); got != want {
		t.Errorf("sample:\n got %s\nwant %s", got, want)
	}
	if got, want := string(records[2].AppendJSON(nil)), `{"kind":"collector_restart","ts":"2026-03-14T00:00:06.500Z","node":"odd\"name ünïcode"}`; got != want {
		t.Errorf("restart:\n got %s\nwant %s", got, want)
	}
	// A known empty list is written [] (on for no priority), never null
	// (which would read back as unknown).
	if got, want := string(records[4].AppendJSON(nil)), `{"kind":"sample","ts":"2026-03-14T00:00:08.000Z","node":"gpu-017","device":"mlx5_0","port":1,"netdev":"ens1f0np0","link_layer":"Ethernet","state":"ACTIVE","rate":"200 Gb/sec (4X HDR)","counters":{"symbol_error":0},"config":{"mtu":4200,"pfc_enabled":[3],"ecn_np_enabled":[],"trust":"dscp"}}`; got != want {
		t.Errorf("config:\n got %s\nwant %s", got, want)
	}
	if got, want := string(records[5].AppendJSON(nil)), `"config":{"ecn_rp_enabled":[3,4]}}`; !strings.HasSuffix(got, want) {
		t.Errorf("config with one key:\n got %s\nwant it to end in %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		var b bytes.Buffer
		w := NewWriter(&b)
		if gz {
			w = NewGzipWriter(&b)
		}
		for i := range records {
			if err := w.Write(&records[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(&b, "roundtrip")
		if err != nil {
			t.Fatal(err)
		}
		for i := range records {
			l, err := r.Next()
			if err != nil {
				t.Fatalf("gzip %v, record %d: %v", gz, i, err)
			}
			if got := ToRecord(l); !sameRecord(got, &records[i]) {
				t.Errorf("gzip %v, record %d:\n got %+v\nwant %+v", gz, i, got, records[i])
			}
		}
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("gzip %v: after the records: %v, want io.EOF", gz, err)
		}
	}
}

// sameRecord compares what the format keeps: counters as sets of keys, the
// time to the millisecond, a restart's kind, time and node only.
func sameRecord(a, b *Record) bool {
	if a.Kind != b.Kind || !a.Time.Equal(b.Time.Truncate(time.Millisecond)) || a.Node != b.Node {
		return false
	}
	if a.Kind == KindCollectorRestart {
		return true
	}
	sorted := func(cs []Counter) []Counter {
		if cs == nil {
			return nil
		}
		return slices.SortedFunc(slices.Values(cs), func(x, y Counter) int { return strings.Compare(x.Name, y.Name) })
	}
	return a.Device == b.Device && a.Port == b.Port && a.Netdev == b.Netdev && a.LinkLayer == b.LinkLayer &&
		a.State == b.State && a.Rate == b.Rate && slices.Equal(sorted(a.Counters), sorted(b.Counters)) &&
		slices.Equal(sorted(a.HWCounters), sorted(b.HWCounters)) && slices.Equal(sorted(a.Ethtool), sorted(b.Ethtool)) &&
		(a.Config == nil) == (b.Config == nil) && a.Config.Equal(b.Config)
}

func TestWriterRefusesWhatTheReaderWould(t *testing.T) {
	ts := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	for name, r := range map[string]Record{
		"no node":     {Kind: KindCollectorRestart, Time: ts},
		"port 0":      {Kind: KindSample, Time: ts, Node: "a", Device: "d", Counters: []Counter{}},
		"no counters": {Kind: KindSample, Time: ts, Node: "a", Device: "d", Port: 1},
		"no kind":     {Time: ts, Node: "a"},
		"year 10000":  {Kind: KindCollectorRestart, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Node: "a"},
		"mtu 0":       {Kind: KindSample, Time: ts, Node: "a", Device: "d", Port: 1, Counters: []Counter{}, Config: &schemas.PortConfig{MTU: ptr(0)}},
	} {
		w := NewWriter(io.Discard)
		if err := w.Write(&r); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: %v, want an error naming line 1", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for i := range records {
		f.Add(records[i].AppendJSON(nil))
	}
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{"x":18446744073709551615}}`))
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00.123456789+05:30","node":"a","device":"d","port":1,"ethtool":{}}`))
	f.Add([]byte(`{"kind":"collector_restart","ts":"1970-01-01T00:00:00Z","node":"\u0000"}`))
	f.Add([]byte(`{}`))
	// Found by the fuzzer in CI: year 0 at +00:10 is year -1 in UTC.
	f.Add([]byte(`{"kind":"sample","ts":"0000-01-01T0:00:00+00:10","node":"0","deviCe":"0","port":1,"ethtool":{}}`))
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":9000,"pfc_enabled":[3,3],"ecn_np_enabled":[],"ecn_rp_enabled":null,"trust":"pcp","x":{}}}`))
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{}}`))
	f.Add([]byte(`{"kind":"sample","ts":"2026-03-14T00:00:00Z","node":"a","device":"d","port":1,"counters":{},"config":{"mtu":65537,"pfc_enabled":[-1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data)
		if err != nil {
			return
		}
		if l.Node == "" || l.Time().IsZero() && l.TS == "" {
			t.Fatalf("accepted a line without node or time: %q", data)
		}
		// What the reader accepts, the writer writes back and the reader
		// reads the same.
		rec := ToRecord(l)
		back, err := Parse(rec.AppendJSON(nil))
		if err != nil {
			t.Fatalf("%q: written back as %q, which does not parse: %v", data, rec.AppendJSON(nil), err)
		}
		if got := ToRecord(back); !sameRecord(got, rec) {
			t.Fatalf("%q: round trip changed it:\n got %+v\nwant %+v", data, got, rec)
		}
	})
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"kind\":\"collector_restart\",\"ts\":\"2026-03-14T00:00:00Z\",\"node\":\"a\"}\n\n{"))
	f.Add(gzipped(f, records[0].AppendJSON(nil)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		defer r.Close()
		for range 1000 {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "fuzz") {
					t.Fatalf("error %v does not wrap ErrMalformed or name the input", err)
				}
				return
			}
		}
	})
}

func gzipped(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkReader reads a recorded scenario (7 MB of JSON lines): replay's
// parsing cost.
//
//	go test -run '^$' -bench Reader ./schemas/trace
func BenchmarkReader(b *testing.B) {
	gz, err := os.ReadFile("../../test/scenarios/pfc-storm/trace.jsonl.gz")
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"plain", "gzip"} {
		data := map[string][]byte{"plain": raw, "gzip": gz}[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(data), name)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
