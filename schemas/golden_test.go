package schemas

// The golden wire fixture pins the counter dictionary and the bytes of a
// fixed batch. The dictionary is append-only: an index, once shipped, names
// the same counter for every decoder of any age. Removing, renaming or
// reordering an entry fails this test; appending one fails it too until the
// golden files are regenerated on purpose:
//
//	go test ./schemas -run TestWireGolden -update

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden wire files in testdata (append-only dictionary changes only)")

var (
	goldenDictPath  = filepath.Join("testdata", "counter_dict.golden")
	goldenBatchPath = filepath.Join("testdata", "batch_v2.golden.hex")
)

func dictLines() []string {
	out := make([]string, len(counterDict))
	for i, e := range counterDict {
		out[i] = e.src.String() + "/" + e.name
	}
	return out
}

func parseDictLine(t *testing.T, line string) dictKey {
	src, name, ok := strings.Cut(line, "/")
	if !ok {
		t.Fatalf("golden dictionary line %q is not source/name", line)
	}
	for _, s := range []Source{SourceCounters, SourceHWCounters, SourceEthtool} {
		if s.String() == src {
			return dictKey{s, name}
		}
	}
	t.Fatalf("golden dictionary line %q: unknown source", line)
	return dictKey{}
}

// goldenBatch is a fixed batch built from the golden dictionary (not the
// current one), so appending to the dictionary leaves its bytes alone:
// every counter with a delta, every fifth with flags and a raw value, plus
// counters by name and one gauge.
func goldenBatch(t *testing.T, names []string) *CounterBatch {
	p := PortSample{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
		Rate: "400 Gb/sec (4X NDR)", TimeMs: 1773446405010, IntervalMs: 5000, Gauges: map[string]uint64{"lifespan": 10}}
	for i, line := range names {
		k := parseDictLine(t, line)
		c := CounterDelta{Name: k.name, Source: k.src, Delta: uint64(i*i) * 1001}
		if i%5 == 0 {
			c.Flags, c.Value = Flag(1+i%31), uint64(i)<<32|uint64(i)
		}
		p.Counters = append(p.Counters, c)
	}
	p.Counters = append(p.Counters, CounterDelta{Name: "vendor_counter", Source: SourceEthtool, Delta: 3, Value: 7, Flags: FlagReset})
	return &CounterBatch{Node: "gpu-017.pod-a", BootID: "golden", Seq: 7, TimeMs: 1773446405010, Ports: []PortSample{p}}
}

func hexLines(b []byte) []byte {
	var out bytes.Buffer
	for len(b) > 0 {
		n := min(32, len(b))
		out.WriteString(hex.EncodeToString(b[:n]))
		out.WriteByte('\n')
		b = b[n:]
	}
	return out.Bytes()
}

func TestWireGolden(t *testing.T) {
	current := dictLines()
	raw, err := os.ReadFile(goldenDictPath)
	if err != nil && !*update {
		t.Fatalf("%v (create it with -update)", err)
	}
	golden := strings.Fields(string(raw))
	for i, name := range golden {
		switch {
		case i >= len(current):
			t.Fatalf("dictionary entry %d %q was removed: the dictionary is append-only (counterDict in dict.go)", i, name)
		case current[i] != name:
			t.Fatalf("dictionary entry %d was %q and is now %q: the dictionary is append-only, an index names one counter forever", i, name, current[i])
		}
	}
	if n := len(current) - len(golden); n > 0 {
		if !*update {
			t.Fatalf("%d dictionary entries appended (%s...): regenerate the golden files on purpose with: go test ./schemas -run TestWireGolden -update",
				n, current[len(golden)])
		}
		if err := os.WriteFile(goldenDictPath, []byte(strings.Join(current, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d entries", goldenDictPath, len(current))
		golden = current
	}

	b := goldenBatch(t, golden)
	data, err := EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenBatchPath, hexLines(data), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d bytes", goldenBatchPath, len(data))
	}
	wantHex, err := os.ReadFile(goldenBatchPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(string(wantHex)), ""))
	if err != nil {
		t.Fatalf("%s: %v", goldenBatchPath, err)
	}
	if !bytes.Equal(data, want) {
		at := 0
		for at < min(len(data), len(want)) && data[at] == want[at] {
			at++
		}
		t.Fatalf("the fixed batch encodes to %d bytes that differ from %s (%d bytes) from byte %d: the wire format changed; "+
			"a change readers of any age cannot follow needs a new Version", len(data), goldenBatchPath, len(want), at)
	}
	// The golden bytes decode to the batch, whatever was appended since.
	got, err := DecodeBatch(want)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Ports {
		got.Ports[i].present, got.Ports[i].indexed = [dictWords]uint64{}, false
	}
	if w := onWire(b); !reflect.DeepEqual(w, got) {
		t.Fatalf("golden bytes decode to\n%+v\nwant\n%+v", got, w)
	}
	t.Log(fmt.Sprintf("%d dictionary entries, fixed batch %d bytes", len(golden), len(data)))
}
