package sink

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// byTableKey is port_samples' ORDER BY (node, device, port, time_ms) as
// ClickHouse compares it, row by row: what sampleOrder must agree with
// (TestSampleOrderIsTheTableKey holds both to the server's sorting key).
func byTableKey(a, b *SampleRow) int {
	return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Device, b.Device),
		cmp.Compare(a.Port, b.Port), cmp.Compare(a.TimeMs, b.TimeMs))
}

func row(node, dev string, port uint16, ms int64) *SampleRow {
	return &SampleRow{Node: node, Device: dev, Port: port, TimeMs: ms}
}

// arrival is a flush as it arrives: messages in time order, each one
// node's ports in order.
func arrival(nodes, devs, ports, times int) []*SampleRow {
	var rows []*SampleRow
	for t := range times {
		for n := range nodes {
			for d := range devs {
				for p := range ports {
					rows = append(rows, row(fmt.Sprintf("gpu-%05d", (n*7919)%nodes), fmt.Sprintf("mlx5_%d", d), uint16(p+1), int64(1767225600000+1000*t+n%3)))
				}
			}
		}
	}
	return rows
}

func TestSampleOrder(t *testing.T) {
	random := func(seed uint64, n int) []*SampleRow {
		rng := rand.New(rand.NewPCG(seed, 1))
		// Few distinct values, so equal nodes, devices and ports meet.
		names := []string{"", "a", "a-1", "B", "b", "gpu-1", "gpu-10", "gpu-2", "é", "a\x00"}
		rows := make([]*SampleRow, n)
		for i := range rows {
			rows[i] = row(names[rng.IntN(len(names))], names[rng.IntN(len(names))], uint16(rng.IntN(3)), rng.Int64N(5)-2)
		}
		return rows
	}
	for _, tc := range []struct {
		name string
		rows []*SampleRow
	}{
		{"empty", nil},
		{"one", []*SampleRow{row("a", "mlx5_0", 1, 5)}},
		{"bytewise strings", []*SampleRow{row("b", "mlx5_2", 1, 1), row("a-1", "mlx5_10", 1, 1), row("B", "mlx5_1", 1, 1), row("a", "mlx5_2", 1, 1), row("a", "mlx5_10", 1, 1)}},
		{"time within a port", []*SampleRow{row("a", "d", 1, 9), row("a", "d", 2, 1), row("a", "d", 1, -3), row("a", "d", 1, 4)}},
		{"port before time", []*SampleRow{row("a", "d", 2, 1), row("a", "d", 1, 2), row("a", "d", 65535, 0), row("a", "d", 0, 3)}},
		{"equal rows", []*SampleRow{row("a", "d", 1, 1), row("a", "d", 1, 1), row("a", "c", 1, 1)}},
		{"arrival order", arrival(50, 2, 2, 3)},
		{"random", random(1, 2000)},
		{"times too far apart to pack", []*SampleRow{row("a", "d", 1, math.MaxInt64), row("a", "d", 1, math.MinInt64), row("a", "c", 2, 0), row("a", "d", 1, -1)}},
		{"random, many devices", func() []*SampleRow {
			rows := random(2, 70000)
			for i, r := range rows {
				r.Device = fmt.Sprint(i % 66000) // more device names than 16 bits count
			}
			return rows
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o sampleOrder
			for round := range 2 { // a second INSERT through the same sorter
				rows := slices.Clone(tc.rows)
				rng := rand.New(rand.NewPCG(uint64(round), 2))
				rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
				o.sort(rows)
				for i := 1; i < len(rows); i++ {
					if byTableKey(rows[i-1], rows[i]) > 0 {
						t.Fatalf("round %d: row %d %+v before row %d %+v", round, i-1, *rows[i-1], i, *rows[i])
					}
				}
				if !sameRows(rows, tc.rows) {
					t.Fatalf("round %d: the sorted rows are not the rows given", round)
				}
				if len(o.nodes.id) != 0 || len(o.nodes.names) != 0 || len(o.devs.id) != 0 || slices.ContainsFunc(o.keys[:cap(o.keys)], func(k orderKey) bool { return k.row != nil }) {
					t.Fatalf("round %d: the sorter keeps the rows' strings or rows", round)
				}
			}
		})
	}
}

// sameRows reports whether a and b hold the same row pointers, in any order.
func sameRows(a, b []*SampleRow) bool {
	if len(a) != len(b) {
		return false
	}
	n := map[*SampleRow]int{}
	for _, r := range a {
		n[r]++
	}
	for _, r := range b {
		n[r]--
	}
	for _, c := range n {
		if c != 0 {
			return false
		}
	}
	return true
}

// BenchmarkSampleOrder: sorting a default flush (65 536 rows: 4 096 nodes
// of 2 devices of 2 ports, 4 readings each, as they arrive) by the table's
// key, the old way (comparing rows through their pointers) and by ranked
// keys, side by side.
//
//	go test -run '^$' -bench '^BenchmarkSampleOrder$' -benchmem ./sink
func BenchmarkSampleOrder(b *testing.B) {
	rows := arrival(4096, 2, 2, 4)
	type ref struct{ e, r *SampleRow } // the pipeline's refs: entry and row
	b.Run("compare", func(b *testing.B) {
		b.ReportAllocs()
		refs := make([]ref, len(rows))
		for b.Loop() {
			for i, r := range rows {
				refs[i] = ref{r, r}
			}
			slices.SortFunc(refs, func(a, b ref) int { return byTableKey(a.r, b.r) })
		}
	})
	b.Run("keyed", func(b *testing.B) {
		b.ReportAllocs()
		var o sampleOrder
		work := make([]*SampleRow, len(rows))
		for b.Loop() {
			copy(work, rows)
			o.sort(work)
		}
	})
}
