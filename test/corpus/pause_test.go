package corpus

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor/detect/pfcstorm"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestCorpusGlobalPauseStorm drives pfcstorm.Detector with the real IEEE
// 802.3x global pause port of cx4lx-global-pause-ethtool.txt (ConnectX-4
// Lx, 25 GbE, eth03): its captured statistics are the first reading
// (tx_global_pause 1,266,552 frames, tx_global_pause_duration 555,665,182
// µs, no per-priority pause counter), through the delta engine.
//
// Synthetic: the rate (25 Gb/sec, the notes' "25G"; the capture has no
// sysfs), and the readings after it, every 10 s for 2 minutes, in which
// tx_global_pause_duration grows by the stated share of the interval (in
// µs), and tx_global_pause, tx_pause_ctrl_phy and tx_mac_control_phy (equal
// in the capture) by one frame per 65,535 µs paused, a made-up frame
// spacing: the count feeds only the frames-per-second figure, which the
// test does not check. Nothing else moves: the port
// receives no pauses (rx_global_pause stays 0, as captured) and lists no
// ECN or CNP counters.
func TestCorpusGlobalPauseStorm(t *testing.T) {
	real := onlyStats(t, "cx4lx-global-pause-ethtool.txt")
	for _, name := range []string{"tx_global_pause_duration", "tx_global_pause", "rx_global_pause_duration", "rx_global_pause"} {
		if _, ok := real[name]; !ok {
			t.Fatalf("the capture has no %s", name)
		}
	}
	const interval = 10 * time.Second
	tests := []struct {
		name     string
		share    float64 // of each interval paused
		wantOpen bool
	}{
		{"90% of every interval paused opens a storm", 0.9, true},
		{"10% of every interval paused is no storm", 0.1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, pfcstorm.New())
			defer func() {
				if t.Failed() {
					r.logEvents()
				}
			}()
			stats := cloneMap(real)
			durInc := uint64(tc.share * float64(interval.Microseconds()))
			frameInc := durInc / 65_535
			for i := range 13 {
				at := base.Add(time.Duration(i) * interval)
				if i > 0 {
					stats = cloneMap(stats)
					stats["tx_global_pause_duration"] += durInc
					stats["tx_global_pause"] += frameInc
					stats["tx_pause_ctrl_phy"] += frameInc
					stats["tx_mac_control_phy"] += frameInc
				}
				b := r.read(ethtoolReading("cx4lx-global-pause", "eth03", "25 Gb/sec", at, stats))
				if i > 0 {
					p := sampleOf(t, b, "cx4lx-global-pause", 1, "eth03")
					if cd, ok := p.Counter(schemas.SourceEthtool, "tx_global_pause_duration"); !ok || cd.Delta != durInc || cd.Flags != 0 {
						t.Fatalf("reading %d: tx_global_pause_duration delta %d flags %05b (present %v), want %d", i, cd.Delta, cd.Flags, ok, durInc)
					}
				}
			}
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
			if ev.Type != schemas.TypePFCStorm || ev.Subject.Device != "cx4lx-global-pause" || ev.Origin == nil || ev.Origin.Silent {
				t.Errorf("event %s subject %v origin %+v", ev.Type, ev.Subject, ev.Origin)
			}
			// The first reading with deltas (10 s) opens it: 90% paused,
			// no pause received, no congestion-control activity.
			if want := schemas.MillisOf(base.Add(interval)); ev.DetectedAt != want {
				t.Errorf("detected at %s, want %s (the first interval with deltas)", ev.DetectedAt, want)
			}
			if ev.Evidence["flow_control"] != "global_pause" || ev.Evidence["priority"] != -1 {
				t.Errorf("evidence flow_control %v priority %v, want global_pause and -1", ev.Evidence["flow_control"], ev.Evidence["priority"])
			}
			if f, _ := ev.Evidence["tx_pause_fraction"].(float64); f != 0.9 {
				t.Errorf("evidence tx_pause_fraction %v, want 0.9", ev.Evidence["tx_pause_fraction"])
			}
			if f, _ := ev.Evidence["rx_pause_fraction"].(float64); f != 0 {
				t.Errorf("evidence rx_pause_fraction %v, want 0", ev.Evidence["rx_pause_fraction"])
			}
			if _, ok := ev.Evidence["lag_members"]; ok {
				t.Errorf("a single port's storm has lag_members %v", ev.Evidence["lag_members"])
			}
		})
	}
}
