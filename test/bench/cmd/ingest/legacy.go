package main

import (
	"fmt"
	"slices"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// columns0011 are the port_samples columns migration 0011 added; dropping
// them gives the layout before it back (the ALIAS columns first: they
// depend on the others).
var columns0011 = []string{"extra_name", "flagged_name", "delta_name", "delta_value",
	"extra_id", "extra_delta", "flagged_id", "flagged_flags", "flagged_value",
	"unknown_source", "unknown_name", "unknown_delta", "unknown_value", "unknown_flags"}

// legacyColumns is what the sink wrote before 0011: the same columns up to
// the pause sums, then the per-priority pause arrays and every counter of
// the sample by name, then the gauges and the derived figures.
var legacyColumns = func() []string {
	cols := sink.SampleColumns
	head := cols[:slices.Index(cols, "tx_pause_duration_us")+1]
	tail := cols[slices.Index(cols, "gauge_name"):]
	out := append(slices.Clone(head), "rx_prio_pause", "tx_prio_pause", "rx_prio_pause_duration_us", "tx_prio_pause_duration_us",
		"counter_source", "counter_name", "counter_delta", "counter_value", "counter_flags")
	return append(out, tail...)
}()

// legacyRows are the rows of legacyColumns; samples are sink.SampleRows of
// batches, in order.
func legacyRows(batches []*schemas.CounterBatch, samples []sink.SampleRow) [][]any {
	head := slices.Index(sink.SampleColumns, "tx_pause_duration_us") + 1
	tail := slices.Index(sink.SampleColumns, "gauge_name")
	prio := map[string][2]int{} // counter name -> kind, priority
	for p := range 8 {
		for k, f := range []string{"rx_prio%d_pause", "tx_prio%d_pause", "rx_prio%d_pause_duration", "tx_prio%d_pause_duration"} {
			prio[fmt.Sprintf(f, p)] = [2]int{k, p}
		}
	}
	out := make([][]any, 0, len(samples))
	i := 0
	for _, b := range batches {
		for _, p := range b.Ports {
			v := samples[i].Values()
			i++
			var pauses [4][8]uint64
			n := len(p.Counters)
			src, names, deltas, values, flags := make([]uint8, n), make([]string, n), make([]uint64, n), make([]uint64, n), make([]uint8, n)
			for j, c := range p.Counters {
				src[j], names[j], deltas[j], values[j], flags[j] = uint8(c.Source), c.Name, c.Delta, c.Value, uint8(c.Flags)
				if kp, ok := prio[c.Name]; ok && c.Source == schemas.SourceEthtool {
					pauses[kp[0]][kp[1]] += c.Delta
				}
			}
			row := append(slices.Clone(v[:head]), pauses[0][:], pauses[1][:], pauses[2][:], pauses[3][:], src, names, deltas, values, flags)
			out = append(out, append(row, v[tail:]...))
		}
	}
	return out
}
