package corpus

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/processor/detect/countersaturated"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestCorpusXmitWaitDeltas: port_xmit_wait (32-bit, saturating) through the
// delta engine, from the real readings of cx7-ib-ndr-counters.txt (mlx5_0,
// port_xmit_wait 2,489,603,687, below its pin) and
// mlx5-ib-pinned-counters.txt (mlx5_1, pinned at 4,294,967,295). The first
// reading is the capture; the second, 10 s later, adds the stated
// increment to port_xmit_wait alone (synthetic), stopping at 2^32-1 as the
// hardware does.
func TestCorpusXmitWaitDeltas(t *testing.T) {
	tests := []struct {
		name, file, device string
		real               uint64 // the captured value
		inc                uint64 // synthetic, added 10 s later
		wantDelta          uint64
		wantFlags          schemas.Flag
	}{
		{"below the pin counts exactly", "cx7-ib-ndr-counters.txt", "mlx5_0", 2489603687, 1_234_567, 1_234_567, 0},
		// A busy NDR port waits a lot: 1.8e9 ticks brings it to 4,289,603,687.
		{"close under the pin still counts exactly", "cx7-ib-ndr-counters.txt", "mlx5_0", 2489603687, 1_800_000_000, 1_800_000_000, 0},
		// It reaches its pin within the interval: the climb is counted,
		// the counter is flagged saturated.
		{"climbing onto the pin is flagged", "cx7-ib-ndr-counters.txt", "mlx5_0", 2489603687, 2_000_000_000, math.MaxUint32 - 2489603687, schemas.FlagSaturated},
		{"pinned in the capture stays pinned", "mlx5-ib-pinned-counters.txt", "mlx5_1", math.MaxUint32, 1_000_000, 0, schemas.FlagSaturated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, fixtureByFile(t, tc.file))
			pr := findReading(t, readings(t, c, c.dumps[0], base), tc.device, 1)
			if v := pr.Counters["port_xmit_wait"]; v != tc.real {
				t.Fatalf("captured port_xmit_wait %d, want %d", v, tc.real)
			}
			e := collector.NewEngine(nil)
			e.Apply(&collector.Reading{Node: "corpus", Time: base, Ports: []collector.PortReading{pr}})
			next := pr
			next.Time = base.Add(10 * time.Second)
			next.Counters = cloneMap(pr.Counters)
			next.Counters["port_xmit_wait"] = min(tc.real+tc.inc, math.MaxUint32)
			b := e.Apply(&collector.Reading{Node: "corpus", Time: next.Time, Ports: []collector.PortReading{next}})
			cd, ok := sampleOf(t, b, tc.device, 1, "").Counter(schemas.SourceCounters, "port_xmit_wait")
			if !ok || cd.Delta != tc.wantDelta || cd.Flags != tc.wantFlags {
				t.Errorf("port_xmit_wait %d -> %d: delta %d flags %05b (present %v), want delta %d flags %05b",
					tc.real, next.Counters["port_xmit_wait"], cd.Delta, cd.Flags, ok, tc.wantDelta, tc.wantFlags)
			}
		})
	}
}

// TestCorpusCounterSaturated feeds real IB port readings through the delta
// engine into countersaturated.Detector, each capture read three times
// 10 s apart with nothing changed (pinned counters cannot move; the others
// are held still, which is all the captures say).
//
// What the detector does (processor/detect/countersaturated): it raises on a
// pinned saturating error counter (and on a pinned 32-bit data counter),
// never on port_xmit_wait alone, a congestion figure a busy IB port pins
// in normal use; a pinned port_xmit_wait is named (also_pinned) only in an
// incident that is open for other counters.
func TestCorpusCounterSaturated(t *testing.T) {
	tests := []struct {
		name, file, device string
		// edit, if set, changes the captured reading (synthetic; said per
		// case).
		edit          func(m map[string]uint64)
		wantOpen      bool
		wantSaturated []string // evidence saturated, sorted
		wantAlso      bool     // evidence also_pinned = [port_xmit_wait]
	}{
		{name: "mlx5-ib-pinned as captured: the pinned error counters raise it",
			file: "mlx5-ib-pinned-counters.txt", device: "mlx5_1", wantOpen: true,
			wantSaturated: []string{"excessive_buffer_overrun_errors", "link_downed", "port_xmit_discards"}, wantAlso: true},
		// Synthetic: the three pinned error counters set to 0 (what
		// clearing those alone would leave), port_xmit_wait at its real
		// pin, everything else as captured.
		{name: "mlx5-ib-pinned with only port_xmit_wait pinned: nothing",
			file: "mlx5-ib-pinned-counters.txt", device: "mlx5_1",
			edit: func(m map[string]uint64) {
				m["port_xmit_discards"], m["link_downed"], m["excessive_buffer_overrun_errors"] = 0, 0, 0
			}},
		// Real too: this ConnectX-7's excessive_buffer_overrun_errors (a
		// 4-bit field) reads 15, its maximum, while port_xmit_wait is
		// below its pin.
		{name: "cx7-ib-ndr as captured: excessive_buffer_overrun_errors at 15 is pinned",
			file: "cx7-ib-ndr-counters.txt", device: "mlx5_0", wantOpen: true,
			wantSaturated: []string{"excessive_buffer_overrun_errors"}},
		// Synthetic: that counter set to 0 and port_xmit_wait to its pin.
		{name: "cx7-ib-ndr with only port_xmit_wait pinned: nothing",
			file: "cx7-ib-ndr-counters.txt", device: "mlx5_0",
			edit: func(m map[string]uint64) {
				m["excessive_buffer_overrun_errors"], m["port_xmit_wait"] = 0, math.MaxUint32
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, fixtureByFile(t, tc.file))
			pr := findReading(t, readings(t, c, c.dumps[0], base), tc.device, 1)
			pr.Counters = cloneMap(pr.Counters)
			if tc.edit != nil {
				tc.edit(pr.Counters)
			}
			r := newRig(t, countersaturated.New())
			for i := range 3 {
				next := pr
				next.Time = base.Add(time.Duration(i) * 10 * time.Second)
				b := r.read(next)
				if tc.wantAlso {
					if cd, _ := sampleOf(t, b, tc.device, 1, "").Counter(schemas.SourceCounters, "port_xmit_wait"); cd.Flags&schemas.FlagSaturated == 0 {
						t.Errorf("reading %d: port_xmit_wait %d not flagged saturated", i, cd.Value)
					}
				}
			}
			defer func() {
				if t.Failed() {
					r.logEvents()
				}
			}()
			opens := r.ofState(schemas.StateOpen)
			if !tc.wantOpen {
				if len(r.events) != 0 {
					t.Errorf("%d events, want none", len(r.events))
				}
				return
			}
			if len(opens) != 1 {
				t.Fatalf("%d opens, want 1", len(opens))
			}
			ev := opens[0]
			if ev.Type != schemas.TypeCounterSaturated || ev.Subject.Device != tc.device || ev.Subject.Port != 1 {
				t.Errorf("event %s about %v", ev.Type, ev.Subject)
			}
			sat, _ := ev.Evidence["saturated"].([]string)
			if !slices.Equal(sat, tc.wantSaturated) {
				t.Errorf("evidence saturated %v, want %v", ev.Evidence["saturated"], tc.wantSaturated)
			}
			if slices.Contains(sat, "port_xmit_wait") {
				t.Errorf("port_xmit_wait is among the saturated counters %v", sat)
			}
			also, hasAlso := ev.Evidence["also_pinned"].([]string)
			if tc.wantAlso != hasAlso || hasAlso && !slices.Equal(also, []string{"port_xmit_wait"}) {
				t.Errorf("evidence also_pinned %v, want port_xmit_wait: %v", ev.Evidence["also_pinned"], tc.wantAlso)
			}
			// The values are the captured maxima.
			vals, _ := ev.Evidence["values"].(map[string]any)
			for _, name := range tc.wantSaturated {
				if v, _ := vals[name].(uint64); v != pr.Counters[name] || v != schemas.KindOf(schemas.SourceCounters, name).Max() {
					t.Errorf("evidence value of %s %v, want the captured %d (its maximum)", name, vals[name], pr.Counters[name])
				}
			}
		})
	}
}
