package schemas_test

// Hostile messages against the decoders: counts that claim far more than
// the message holds must be refused before anything is allocated for them.
//
//	go test -run '^$' -bench '^BenchmarkDecodeHostile$' -benchmem ./schemas

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// hostileMessages are batches and inventories of about 900 KB whose counts
// claim far more than their bytes.
func hostileMessages() map[string][]byte {
	header := func(ports uint32) []byte {
		b := []byte{0x96, schemas.Version, 0xa1, 'x', 0xa1, 'b', 0x01}
		b = binary.BigEndian.AppendUint64(append(b, 0xcf), 1773446405010)
		return binary.BigEndian.AppendUint32(append(b, 0xdd), ports)
	}
	pad := func(b []byte, c byte, n int) []byte {
		for range n {
			b = append(b, c)
		}
		return b
	}
	const size = 900_000
	m := map[string][]byte{}
	// 900k ports, one byte each: an empty array that is not a port.
	m["900k ports"] = pad(header(900_000), 0x90, size)
	// A port whose extra-counter array claims 150k entries.
	port := []byte{0x9b, 0xa1, 'd', 0x01, 0xa0, 0xa0, 0xa0, 0xa0, 0x01, 0x01, 0xc4, 0x02, 0x00, 0x00}
	port = binary.BigEndian.AppendUint32(append(port, 0xdd), 150_000)
	m["150k extra counters"] = pad(append(header(1), port...), 0x95, size)
	// Gauges: a map that claims 450k entries.
	gport := []byte{0x9b, 0xa1, 'd', 0x01, 0xa0, 0xa0, 0xa0, 0xa0, 0x01, 0x01, 0xc4, 0x02, 0x00, 0x00, 0xc0}
	gport = binary.BigEndian.AppendUint32(append(gport, 0xdf), 450_000)
	m["450k gauges"] = pad(append(header(1), gport...), 0xa0, size)
	// An inventory claiming 900k ports: {"v":2,"n":"x","p":[...]}.
	inv := []byte{0x83, 0xa1, 'v', schemas.Version, 0xa1, 'n', 0xa1, 'x', 0xa1, 'p'}
	inv = binary.BigEndian.AppendUint32(append(inv, 0xdd), 900_000)
	m["inventory 900k ports"] = pad(inv, 0x80, size)
	// An inventory claiming 4 billion ports in 20 bytes.
	m["inventory 4G ports"] = binary.BigEndian.AppendUint32(append([]byte{0x83, 0xa1, 'v', schemas.Version, 0xa1, 'n', 0xa1, 'x', 0xa1, 'p'}, 0xdd), 1<<32-1)
	// 1000 ports, under MaxBatchPorts, in 100 bytes.
	m["1000 ports in 100 bytes"] = pad(header(1000), 0x90, 100)
	// An event whose affected list claims 4 billion entries in 20 bytes.
	ev := []byte{0x82, 0xa1, 'v', schemas.Version, 0xa8}
	ev = append(ev, "affected"...)
	m["event 4G affected"] = binary.BigEndian.AppendUint32(append(ev, 0xdd), 1<<32-1)
	// An event 900 KB deep in nested arrays.
	deep := append([]byte{0x82, 0xa1, 'v', schemas.Version, 0xa8}, "evidence"...)
	m["event nested 900k deep"] = pad(append(deep, 0x81, 0xa1, 'x'), 0x91, size)
	return m
}

func decodeAny(data []byte) error {
	if data[0] == 0x82 {
		_, err := schemas.DecodeEvent(data)
		return err
	}
	if data[0] == 0x83 {
		_, err := schemas.DecodeInventory(data)
		return err
	}
	_, err := schemas.DecodeBatch(data)
	return err
}

// TestDecodeHostileAllocation: each hostile message is refused, and
// decoding it allocates at most a few times its own size (the old decoder
// allocated 151 MB for the 900 KB "900k ports" message).
func TestDecodeHostileAllocation(t *testing.T) {
	for name, data := range hostileMessages() {
		t.Run(name, func(t *testing.T) {
			if err := decodeAny(data); err == nil {
				t.Fatal("accepted")
			} else {
				t.Log(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_ = decodeAny(data)
			runtime.ReadMemStats(&after)
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64<<10+4*len(data)); got > limit {
				t.Fatalf("decoding a %d-byte message allocated %d bytes, more than %d", len(data), got, limit)
			}
			if allocs := testing.AllocsPerRun(3, func() { _ = decodeAny(data) }); allocs > 64 {
				t.Errorf("%.0f allocations", allocs)
			}
		})
	}
}

func BenchmarkDecodeHostile(b *testing.B) {
	for name, data := range hostileMessages() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if decodeAny(data) == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
