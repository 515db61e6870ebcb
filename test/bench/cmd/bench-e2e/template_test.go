package main

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// testBatch is a batch as a collector sends it, two ports, encoded.
func testBatch(tb testing.TB, seq uint64) []byte {
	tb.Helper()
	b := &schemas.CounterBatch{Node: "gpu-001", BootID: "boot", Seq: seq, TimeMs: 1_800_000_000_000, Ports: []schemas.PortSample{
		{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200", TimeMs: 1_800_000_000_013, IntervalMs: 1000,
			Counters: []schemas.CounterDelta{
				{Name: "port_rcv_data", Source: schemas.SourceCounters, Delta: 123456},
				{Name: linkDowned, Source: schemas.SourceCounters, Delta: 0},
				{Name: "vendor_thing", Source: schemas.SourceEthtool, Delta: 7, Value: 99, Flags: schemas.FlagReset},
			},
			Gauges: map[string]uint64{"lifespan": 10}},
		{Device: "mlx5_1", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200", TimeMs: 1_800_000_000_087, IntervalMs: 1000},
	}}
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestRetimeMovesEveryTimeAndTheSequence(t *testing.T) {
	tm, err := locate(testBatch(t, seqBase))
	if err != nil {
		t.Fatal(err)
	}
	if tm.ports != 2 || len(tm.timeOffs) != 3 {
		t.Fatalf("located %d ports, %d times: want 2 and 3", tm.ports, len(tm.timeOffs))
	}
	orig, _ := schemas.DecodeBatch(tm.data)
	for _, tc := range []struct {
		shift int64
		seq   uint64
	}{{0, 0}, {1000, 1}, {86_400_000, 77}, {-5000, 3}} {
		got, err := schemas.DecodeBatch(tm.retime(nil, tc.shift, tc.seq))
		if err != nil {
			t.Fatalf("shift %d: %v", tc.shift, err)
		}
		if got.Seq != seqBase+tc.seq || got.TimeMs != orig.TimeMs+tc.shift {
			t.Errorf("shift %d seq %d: batch seq %d time %d", tc.shift, tc.seq, got.Seq, got.TimeMs)
		}
		for i := range got.Ports {
			if got.Ports[i].TimeMs != orig.Ports[i].TimeMs+tc.shift {
				t.Errorf("shift %d: port %d time %d, want %d", tc.shift, i, got.Ports[i].TimeMs, orig.Ports[i].TimeMs+tc.shift)
			}
			if len(got.Ports[i].Counters) != len(orig.Ports[i].Counters) || got.Ports[i].IntervalMs != orig.Ports[i].IntervalMs {
				t.Errorf("shift %d: port %d changed beyond its time", tc.shift, i)
			}
		}
	}
}

func TestLocateRefusesWhatCannotBePatched(t *testing.T) {
	small := testBatch(t, 7) // a sequence number that is not fixed-width
	if _, err := locate(small); err == nil {
		t.Error("a one-byte sequence number was accepted")
	}
	data := testBatch(t, seqBase)
	if _, err := locate(append(data, 0xc0)); err == nil {
		t.Error("trailing bytes were accepted")
	}
	if _, err := locate(data[:len(data)-3]); err == nil {
		t.Error("a truncated batch was accepted")
	}
}

func TestWithFlapRaisesLinkDownedOnOnePort(t *testing.T) {
	tm, err := locate(testBatch(t, seqBase))
	if err != nil {
		t.Fatal(err)
	}
	for port := range 2 {
		data, p, err := tm.withFlap(1000, 9, port)
		if err != nil {
			t.Fatal(err)
		}
		got, err := schemas.DecodeBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq != seqBase+9 || p.TimeMs != got.Ports[port].TimeMs {
			t.Errorf("port %d: seq %d, probe time %d vs %d", port, got.Seq, p.TimeMs, got.Ports[port].TimeMs)
		}
		for i := range got.Ports {
			c, ok := got.Ports[i].Counter(schemas.SourceCounters, linkDowned)
			want := uint64(0)
			if i == port {
				want = 1
			}
			if c.Delta != want || (i == port && !ok) {
				t.Errorf("flap on port %d: port %d link_downed %d (read %v), want %d", port, i, c.Delta, ok, want)
			}
		}
	}
	if _, _, err := tm.withFlap(0, 0, 2); err == nil {
		t.Error("a flap on a port the batch does not have was accepted")
	}
}

func TestFleetTemplates(t *testing.T) {
	nodes, tt, err := fleetTemplates(64, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 8 || len(tt) != 3 {
		t.Fatalf("%d nodes, %d rounds: want 8 and 3", len(nodes), len(tt))
	}
	for i, tick := range tt {
		if i > 0 && tick.at-tt[i-1].at != 1000 {
			t.Errorf("round %d at %d, %d ms after the previous", i, tick.at, tick.at-tt[i-1].at)
		}
		for _, tm := range tick.batches {
			b, err := schemas.DecodeBatch(tm.retime(nil, 5000, 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range b.Ports {
				for _, c := range p.Counters {
					if c.Flags&schemas.FlagFirst != 0 {
						t.Fatalf("round %d, %s: a baseline counter %s: the baseline round must be left out", i, b.Node, c.Name)
					}
				}
			}
			if want := nodes[tm.node] + "/"; tm.msgID(1)[:len(want)] != want {
				t.Errorf("msg id %q does not start with the node", tm.msgID(1))
			}
		}
	}
}

// FuzzLocate: whatever bytes locate accepts, retime changes only the
// located fields: the result decodes as the original does, moved.
func FuzzLocate(f *testing.F) {
	f.Add(testBatch(f, seqBase))
	f.Add(testBatch(f, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		tm, err := locate(data)
		if err != nil {
			return
		}
		orig, err := schemas.DecodeBatch(data)
		if err != nil {
			return // a valid msgpack layout the schema refuses: nothing to compare
		}
		got, err := schemas.DecodeBatch(tm.retime(nil, 60_000, 2))
		if err != nil {
			t.Fatalf("retimed batch does not decode: %v", err)
		}
		if got.Node != orig.Node || len(got.Ports) != len(orig.Ports) || got.TimeMs != orig.TimeMs+60_000 || got.Seq != seqBase+2 {
			t.Fatalf("retime changed more than the times and the sequence")
		}
		for i := range got.Ports {
			if got.Ports[i].TimeMs != orig.Ports[i].TimeMs+60_000 || got.Ports[i].Device != orig.Ports[i].Device {
				t.Fatalf("port %d: retime changed more than its time", i)
			}
		}
	})
}
