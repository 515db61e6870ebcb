package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleInventory() *Inventory {
	return &Inventory{Node: "gpu-017", BootID: "b1", TimeMs: 1773446405010, Ports: []PortInventory{
		{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "400 Gb/sec (4X NDR)", FWVersion: "28.39.1002"},
		{Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "DOWN", Rate: "10 Gb/sec (4X SDR)"},
	}}
}

func TestInventoryRoundTrip(t *testing.T) {
	in := sampleInventory()
	data, err := EncodeInventory(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeInventory(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n in %+v\nout %+v", in, out)
	}
	if _, err := EncodeInventory(&Inventory{Node: "n", Ports: make([]PortInventory, MaxBatchPorts+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("encode of %d ports: %v", MaxBatchPorts+1, err)
	}
}

func TestDecodeInventoryRejects(t *testing.T) {
	raw := func(mut func(m map[string]any)) []byte {
		data, _ := EncodeInventory(sampleInventory())
		var m map[string]any
		if err := msgpack.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		mut(m)
		out, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	port := func(i int, k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["p"].([]any)[i].(map[string]any)[k] = v }
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty device", raw(port(1, "d", "")), `port 1 has device "" port 1`},
		{"port 0", raw(port(0, "p", 0)), `port 0 has device "mlx5_0" port 0`},
		{"negative port", raw(port(0, "p", -3)), `port -3`},
		{"port above 65535", raw(port(0, "p", 70000)), `port 0 has device "mlx5_0" port 70000 (want a device and a port 1-65535)`},
		{"version 1", raw(func(m map[string]any) { m["v"] = 1 }), "unsupported schema version 1"},
		{"version 3", raw(func(m map[string]any) { m["v"] = 3 }), "unsupported schema version 3"},
		{"no version", raw(func(m map[string]any) { delete(m, "v") }), "unsupported schema version 0"},
		{"empty node", raw(func(m map[string]any) { m["n"] = "" }), "empty node"},
		{"far future", raw(func(m map[string]any) { m["t"] = int64(253402300799000) }), "implausible time 253402300799000 ms (9999-12-31T23:59:59.000Z): outside 2000-01-01..2100-01-01"},
		{"negative time", raw(func(m map[string]any) { m["t"] = -1 }), "implausible time -1 ms"},
		{"trailing bytes", append(raw(func(map[string]any) {}), 0xc0), "1 bytes after the message"},
		{"not msgpack", []byte{0xc1}, "not a msgpack type"},
		// 5 bytes claiming 4 billion PFC priorities: msgpack.Unmarshal
		// alone would allocate them all (the CI's fuzz worker died on it).
		{"huge config list", bytes.Replace(raw(port(0, "cfg", map[string]any{"pfc": "HUGE-PFC-LIST"})),
			append([]byte{0xad}, "HUGE-PFC-LIST"...), []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, 1), "4294967295"},
		{"too large", make([]byte, MaxMessageBytes+1), "more than MaxMessageBytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeInventory(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// go test -run '^$' -fuzz '^FuzzDecodeInventory$' -fuzztime 60s ./schemas
func FuzzDecodeInventory(f *testing.F) {
	good, _ := EncodeInventory(sampleInventory())
	f.Add(good)
	f.Add([]byte{0x80})
	f.Add([]byte{0xc0})
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := DecodeInventory(data)
		if err != nil {
			return
		}
		if inv.Node == "" || inv.Version != Version || len(inv.Ports) > MaxBatchPorts || CheckDataTime(inv.TimeMs) != nil {
			t.Fatalf("accepted an invalid inventory: %+v", inv)
		}
		for _, p := range inv.Ports {
			if p.Device == "" || p.Port < 1 {
				t.Fatalf("accepted port %+v", p)
			}
		}
		again, err := EncodeInventory(inv)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeInventory(again)
		if err != nil || !reflect.DeepEqual(inv, back) {
			t.Fatalf("re-encoded inventory reads back as %+v, %v", back, err)
		}
	})
}

// go test -run '^$' -fuzz '^FuzzParseTime$' -fuzztime 60s ./schemas
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-03-14T00:00:05.010Z", "2026-03-14T00:00:05Z", "2026-03-14T02:00:05.123456789+02:00", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "0000-01-01T0:00:00+00:10", "9999-12-31T23:59:59-01:00", "soon", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not RFC 3339") {
				t.Fatalf("error %v does not say what is wrong", err)
			}
			return
		}
		if tm.Location().String() != "UTC" {
			t.Fatalf("ParseTime(%q) is not UTC: %v", s, tm)
		}
		// Millis round trip through the JSON form, to the millisecond.
		m := MillisOf(tm)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Millis
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Millis %s of %q does not read back: %v", b, s, err)
		}
		if back != m {
			t.Fatalf("Millis round trip of %q: %d -> %s -> %d", s, m, b, back)
		}
	})
}

// go test -run '^$' -fuzz '^FuzzCheckBatchSubject$' -fuzztime 60s ./schemas
func FuzzCheckBatchSubject(f *testing.F) {
	f.Add("gpu-017.pod-a", "rdmawatch.counters.3.gpu-017%2Epod-a")
	f.Add("gpu-a", "rdmawatch.counters.gpu-b")
	f.Add("_", "rdmawatch.counters._")
	f.Fuzz(func(t *testing.T, node, subject string) {
		b := &CounterBatch{Node: node}
		if CheckBatchSubject(CountersSubject(node), b) != nil {
			t.Fatalf("the subject a collector of %q publishes on is refused", node)
		}
		if CheckBatchSubject("rdmawatch.counters.15."+SubjectToken(node), b) != nil {
			t.Fatalf("the stored subject of %q is refused", node)
		}
		if CheckBatchSubject(subject, b) == nil {
			// Accepted: the subject's node token is the batch node's.
			tok := subject[strings.LastIndexByte(subject, '.')+1:]
			if tok != SubjectToken(node) || !strings.HasPrefix(subject, "rdmawatch.counters.") {
				t.Fatalf("batch of %q accepted on %q", node, subject)
			}
		}
	})
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "2026-03-14T00:00:05.010Z", want: "2026-03-14T00:00:05.01Z"},
		{in: "2026-03-14T02:00:05+02:00", want: "2026-03-14T00:00:05Z"},
		{in: "0000-01-01T00:00:00Z", want: "0000-01-01T00:00:00Z"},
		{in: "9999-12-31T23:59:59Z", want: "9999-12-31T23:59:59Z"},
		// A fuzzer found these: valid RFC 3339, but year -1 or 10000 in UTC,
		// which no RFC 3339 writer can print back.
		{in: "0000-01-01T0:00:00+00:10", err: "year -1 is outside 0000-9999"},
		{in: "9999-12-31T23:59:59-01:00", err: "year 10000 is outside 0000-9999"},
		{in: "soon", err: `time "soon" is not RFC 3339`},
	} {
		got, err := ParseTime(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTime(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.Format(time.RFC3339Nano) != tc.want {
			t.Errorf("ParseTime(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
