package schemas

// Encode and decode cost of a realistic batch (32 ports of a RoCE host,
// every dictionary counter a mlx5 port shows, a few flagged) and of the
// full-dictionary batch the fuzz seeds start from.
//
//	go test -run '^$' -bench 'Batch$' -benchmem ./schemas

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

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

// BenchmarkDecodeBatch: DecodeBatch (memory of its own per batch) against a
// reused BatchDecoder, side by side.
func BenchmarkDecodeBatch(b *testing.B) {
	data, err := EncodeBatch(hostBatch())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeBatch(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		var d BatchDecoder
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPortHeader weighs the msgpack library's Encoder and Decoder
// primitives against the codec's own append/read functions on the fields
// every port carries (an array header, five strings, three integers): the
// codec uses the library's type codes (msgpcode) but keeps its own framing
// because these are slower (figures in the commit that added this).
func BenchmarkPortHeader(b *testing.B) {
	p := hostBatch().Ports[0]
	b.Run("encode/codec", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = appendArrayLen(buf[:0], 11)
			buf = appendString(buf, p.Device)
			buf = appendUint(buf, uint64(p.Port))
			for _, s := range []string{p.Netdev, p.LinkLayer, p.State, p.Rate} {
				buf = appendString(buf, s)
			}
			buf = appendInt(buf, p.TimeMs)
			buf = appendInt(buf, p.IntervalMs)
		}
	})
	b.Run("encode/library", func(b *testing.B) {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			_ = enc.EncodeArrayLen(11)
			_ = enc.EncodeString(p.Device)
			_ = enc.EncodeUint(uint64(p.Port))
			for _, s := range []string{p.Netdev, p.LinkLayer, p.State, p.Rate} {
				_ = enc.EncodeString(s)
			}
			_ = enc.EncodeInt(p.TimeMs)
			_ = enc.EncodeInt(p.IntervalMs)
		}
	})
	data := appendArrayLen(nil, 11)
	data = appendString(data, p.Device)
	data = appendUint(data, uint64(p.Port))
	for _, s := range []string{p.Netdev, p.LinkLayer, p.State, p.Rate} {
		data = appendString(data, s)
	}
	data = appendInt(data, p.TimeMs)
	data = appendInt(data, p.IntervalMs)
	b.Run("decode/codec", func(b *testing.B) {
		b.ReportAllocs()
		var q PortSample
		for b.Loop() {
			r := &reader{b: data}
			_, _ = r.arrayLen(1)
			q.Device, _ = r.string()
			_, _ = r.uint()
			for _, f := range []*string{&q.Netdev, &q.LinkLayer, &q.State, &q.Rate} {
				*f, _ = r.string()
			}
			q.TimeMs, _ = r.int()
			q.IntervalMs, _ = r.int()
		}
	})
	b.Run("decode/library", func(b *testing.B) {
		b.ReportAllocs()
		var q PortSample
		rd := bytes.NewReader(data)
		dec := msgpack.NewDecoder(rd)
		for b.Loop() {
			rd.Reset(data)
			dec.Reset(rd)
			_, _ = dec.DecodeArrayLen()
			q.Device, _ = dec.DecodeString()
			_, _ = dec.DecodeUint64()
			for _, f := range []*string{&q.Netdev, &q.LinkLayer, &q.State, &q.Rate} {
				*f, _ = dec.DecodeString()
			}
			q.TimeMs, _ = dec.DecodeInt64()
			q.IntervalMs, _ = dec.DecodeInt64()
		}
	})
}
