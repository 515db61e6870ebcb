package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fullBatch carries every counter of the dictionary, of every source, with
// every combination of flags and raw values, plus counters by name and
// gauges: the fuzz seeds start from it so the fuzzer reaches every branch of
// the counter decoder.
func fullBatch() *CounterBatch {
	p := PortSample{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
		Rate: "400 Gb/sec (4X NDR)", TimeMs: 1773446405010, IntervalMs: 5000}
	for i, e := range counterDict {
		c := CounterDelta{Name: e.name, Source: e.src, Delta: uint64(i) * 1_000_003}
		if f := Flag(i % 32); f != 0 {
			c.Flags, c.Value = f, uint64(i)<<(i%57)
		}
		p.Counters = append(p.Counters, c)
	}
	p.Counters = append(p.Counters,
		CounterDelta{Name: "vendor_counter", Source: SourceEthtool, Delta: 1, Value: 1 << 63, Flags: FlagFirst | FlagHeld},
		CounterDelta{Name: "rx_vport_rdma_unicast_bytes", Source: SourceEthtool, Delta: 1 << 40, Value: 1<<64 - 1})
	p.Gauges = map[string]uint64{"lifespan": 10}
	ib := PortSample{Device: "mlx5_1", Port: 2, LinkLayer: "InfiniBand", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
		TimeMs: 1773446405011, IntervalMs: 0}
	for _, e := range counterDict {
		if e.src == SourceCounters {
			ib.Counters = append(ib.Counters, CounterDelta{Name: e.name, Source: e.src, Value: KindOf(e.src, e.name).Max(), Flags: FlagFirst | FlagSaturated})
		}
	}
	return &CounterBatch{Node: "gpu-017.pod-a", BootID: "3f2a", Seq: 1<<64 - 1, TimeMs: 1773446405010, Ports: []PortSample{p, ib}}
}

// batchWithPacked builds a one-port batch whose counters field is packed as
// given, the way a hostile or newer writer could.
func batchWithPacked(packed []byte) []byte {
	b := appendArrayLen(nil, 6)
	b = appendUint(b, Version)
	b = appendString(b, "gpu-a")
	b = appendString(b, "boot")
	b = appendUint(b, 1)
	b = appendInt(b, 1773446405010)
	b = appendArrayLen(b, 1)
	b = appendArrayLen(b, 11)
	b = appendString(b, "mlx5_0")
	b = appendUint(b, 1)
	for range 4 {
		b = appendString(b, "")
	}
	b = appendInt(b, 1773446405010)
	b = appendInt(b, 1000)
	b = appendBin(b, packed)
	return append(b, 0xc0, 0xc0)
}

func TestDecodeCountersRejects(t *testing.T) {
	dictBytes := (len(counterDict) + 7) / 8
	// The first index past the dictionary, in its last byte when the
	// dictionary does not fill it, else in one byte more (a bitmap too long).
	pastBytes := (len(counterDict) + 8) / 8
	past := make([]byte, pastBytes)
	past[pastBytes-1] = 1 << (len(counterDict) % 8)
	pastBitmap := binary.AppendUvarint(nil, uint64(pastBytes))
	pastBitmap = append(pastBitmap, past...)
	pastBitmap = append(pastBitmap, 0, 0)
	pastWant := fmt.Sprintf("counter bitmap: bit %d is past the %d counters", len(counterDict), len(counterDict))
	if pastBytes > dictBytes {
		pastWant = fmt.Sprintf("counter bitmap of %d bytes", pastBytes)
	}

	oneCounter := []byte{1, 0x01} // bitmap: symbol_error present
	tests := []struct {
		name   string
		packed []byte
		want   string
	}{
		{"bit past the dictionary", pastBitmap, pastWant},
		{"bitmap longer than the dictionary", append(binary.AppendUvarint(nil, uint64(dictBytes+1)), make([]byte, dictBytes+1)...), fmt.Sprintf("counter bitmap of %d bytes", dictBytes+1)},
		{"empty", nil, "counter bitmap length"},
		{"truncated bitmap", []byte{3, 0xff}, "counter bitmap: truncated"},
		{"no non-zero bitmap", oneCounter, "non-zero bitmap"},
		{"delta missing", append(oneCounter, 0x01), "delta of counters/symbol_error"},
		{"no flag count", append(oneCounter, 0x00), "flag count"},
		{"too many flags", append(oneCounter, 0x00, 2), "2 flagged of 1 counters"},
		{"flag past the counters", append(oneCounter, 0x00, 1, 1, 0x01, 0), "flag 0 for counter 1 of 1"},
		{"flag without raw value", append(oneCounter, 0x00, 1, 0, 0x01), "raw value of counters/symbol_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBatch(batchWithPacked(tc.packed))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "<nil>") {
				t.Errorf("error prints <nil>: %v", err)
			}
		})
	}
	// The highest index the dictionary has is accepted.
	last := make([]byte, dictBytes)
	last[(len(counterDict)-1)/8] = 1 << ((len(counterDict) - 1) % 8)
	ok := append(binary.AppendUvarint(nil, uint64(dictBytes)), last...)
	ok = append(ok, 0, 0)
	b, err := DecodeBatch(batchWithPacked(ok))
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Ports[0].Counters; len(c) != 1 || c[0].Name != counterDict[len(counterDict)-1].name {
		t.Fatalf("decoded %+v", c)
	}
}

// TestMinWireSizes: the smallest sizes the decoder assumes when it checks a
// count against the bytes left are real minima: an empty port or counter
// encodes to exactly that many bytes, so no valid message is refused.
func TestMinWireSizes(t *testing.T) {
	empty, err := appendBatch(nil, &CounterBatch{})
	if err != nil {
		t.Fatal(err)
	}
	one, err := appendBatch(nil, &CounterBatch{Ports: []PortSample{{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(one) - len(empty); got != minPortBytes {
		t.Errorf("an empty port is %d bytes on the wire, minPortBytes is %d", got, minPortBytes)
	}
	extra, err := appendBatch(nil, &CounterBatch{Ports: []PortSample{{Counters: []CounterDelta{{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The extra array header (1 byte) replaces the nil.
	if got := len(extra) - len(one); got != minExtraBytes {
		t.Errorf("an empty extra counter is %d bytes on the wire, minExtraBytes is %d", got, minExtraBytes)
	}
}

func TestEncodeBatchLimits(t *testing.T) {
	b := &CounterBatch{Node: "n", Ports: make([]PortSample, MaxBatchPorts+1)}
	if _, err := EncodeBatch(b); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d ports: %v, want ErrTooLarge", len(b.Ports), err)
	}
	big := &CounterBatch{Node: "n", Ports: []PortSample{{Device: "d", Port: 1, Rate: strings.Repeat("x", MaxMessageBytes)}}}
	if _, err := EncodeBatch(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a message over MaxMessageBytes: %v, want ErrTooLarge", err)
	}
	if _, err := DecodeBatch(make([]byte, MaxMessageBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("decode over MaxMessageBytes: %v, want ErrTooLarge", err)
	}
	// A batch of MaxBatchPorts/2 ports with every dictionary counter
	// present and moving (deltas under 2^32, one in eight flagged) fits:
	// such a port is about 1 KB. The worst case (every counter flagged with
	// 64-bit values) is about 3.5 KB a port, which is why a writer checks
	// the encoded size too and splits on ErrTooLarge.
	port := PortSample{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
		Rate: "400 Gb/sec (4X NDR)", TimeMs: 1773446405010, IntervalMs: 5000}
	for i, e := range counterDict {
		c := CounterDelta{Name: e.name, Source: e.src, Delta: uint64(i) * 20_000_000}
		if i%8 == 0 {
			c.Flags, c.Value = FlagReset, 1<<40
		}
		port.Counters = append(port.Counters, c)
	}
	full := &CounterBatch{Node: "n", TimeMs: port.TimeMs, Ports: make([]PortSample, MaxBatchPorts/2)}
	for i := range full.Ports {
		full.Ports[i] = port
		full.Ports[i].Port = i + 1
	}
	data, err := EncodeBatch(full)
	if err != nil {
		t.Fatalf("a batch of MaxBatchPorts/2 full ports: %v", err)
	}
	t.Logf("MaxBatchPorts/2 ports with every counter: %d bytes", len(data))
	if _, err := DecodeBatch(data); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeBatchTimes(t *testing.T) {
	tests := []struct {
		name      string
		batch, pt int64
		want      string
	}{
		{"far future batch", 253402214400000, 1773446405010, "batch time: implausible time 253402214400000 ms (9999-12-31T00:00:00.000Z)"},
		{"negative batch", -5000, 1773446405010, "batch time: implausible time -5000 ms"},
		{"before 2000", 946684799999, 1773446405010, "implausible time 946684799999 ms (1999-12-31T23:59:59.999Z)"},
		{"2100", MaxDataTimeMs, 1773446405010, "implausible time 4102444800000 ms (2100-01-01T00:00:00.000Z)"},
		{"port far future", 1773446405010, 1 << 62, "port mlx5_0/1 time: implausible time 4611686018427387904 ms"},
		{"port zero", 1773446405010, 0, "port mlx5_0/1 time: implausible time 0 ms"},
		{"first and last valid", MinDataTimeMs, MaxDataTimeMs - 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch()
			b.TimeMs, b.Ports[0].TimeMs = tc.batch, tc.pt
			data, err := EncodeBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeBatch(data)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrImplausibleTime) {
				t.Fatalf("error %v, want %q and ErrImplausibleTime", err, tc.want)
			}
		})
	}
}
