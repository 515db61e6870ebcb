package schemas

// Encode and decode cost of a realistic batch (32 ports of a RoCE host,
// every dictionary counter a mlx5 port shows, a few flagged) and of the
// full-dictionary batch the fuzz seeds start from.
//
//	go test -run '^$' -bench 'Batch$' -benchmem ./schemas

import "testing"

func hostBatch() *CounterBatch {
	b := &CounterBatch{Node: "gpu-017.pod-a", BootID: "3f2a9c", Seq: 1234, TimeMs: 1773446405010}
	for p := range 32 {
		ps := PortSample{Device: "mlx5_" + string(rune('a'+p/2)), Port: 1 + p%2, Netdev: "ens1f0np0", LinkLayer: "Ethernet",
			State: "ACTIVE", Rate: "400 Gb/sec (4X NDR)", TimeMs: 1773446405010 + int64(p), IntervalMs: 5000,
			Gauges: map[string]uint64{"lifespan": 10}}
		for i, e := range counterDict {
			c := CounterDelta{Name: e.name, Source: e.src}
			if i%3 != 0 {
				c.Delta = uint64(i*p) * 977
			}
			if i == 5 && p%4 == 0 {
				c.Flags, c.Value = FlagSaturated, 65535
			}
			ps.Counters = append(ps.Counters, c)
		}
		b.Ports = append(b.Ports, ps)
	}
	return b
}

func BenchmarkEncodeBatch(b *testing.B) {
	bt := hostBatch()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeBatch(bt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	data, err := EncodeBatch(hostBatch())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBatch(data); err != nil {
			b.Fatal(err)
		}
	}
}
