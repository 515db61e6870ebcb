package corpus

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor/detect/berdrift"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestCorpusBERDriftLinkRate drives berdrift.Detector with the real
// MLNX_OFED mlx5 port of mlx5-100g-ofed-ethtool.txt, which lists
// rx_corrected_bits_phy (17,750,739, nearly all on lane 3: rx_err_lane_3_phy
// 17,722,623) and no rx_bits_phy: the pre-FEC BER can only be measured
// over the link rate x the interval. Its captured statistics are the first
// reading, through the delta engine.
//
// Synthetic: the rate (100 Gb/sec, 4 lanes; the notes show a 100 Gb/s link
// beside the dump, the capture has no sysfs), and the readings after it,
// every 10 s, in which rx_corrected_bits_phy and rx_err_lane_3_phy (the
// lane that errs in the capture) grow by BER x 1e12 bits (100 Gb/s x 10 s)
// with a seeded log-normal noise (sigma 0.3 of ln BER per reading). The
// BER is flat, or flat at 1e-8 for an hour and then rising log-linearly
// (exponentially) to 1e-6, the critical pre-FEC level, in 40 minutes.
// Nothing else moves.
func TestCorpusBERDriftLinkRate(t *testing.T) {
	real := onlyStats(t, "mlx5-100g-ofed-ethtool.txt")
	if _, ok := real["rx_bits_phy"]; ok {
		t.Fatal("the capture lists rx_bits_phy; this test is about a port that does not")
	}
	const (
		interval = 10 * time.Second
		bits     = 100e9 * 10 // 100 Gb/s x 10 s
		m        = 60.0       // seconds
	)
	ramp := func(sec float64) float64 {
		const onset, toCritical = 60 * m, 40 * m
		if sec < onset {
			return 1e-8
		}
		return math.Min(1e-8*math.Exp(math.Log(1e-6/1e-8)*(sec-onset)/toCritical), 1e-6)
	}
	tests := []struct {
		name     string
		ber      func(sec float64) float64
		minutes  int
		wantOpen bool
	}{
		{"a BER rising from 1e-8 to 1e-6 in 40 min opens before it is critical", ramp, 100, true},
		{"a BER flat at 1e-8 is no drift", func(float64) float64 { return 1e-8 }, 100, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, berdrift.New())
			defer func() {
				if t.Failed() {
					r.logEvents()
				}
			}()
			rng := rand.New(rand.NewPCG(25, 1))
			stats := cloneMap(real)
			n := tc.minutes * 6
			for i := range n + 1 {
				sec := float64(i) * interval.Seconds()
				if i > 0 {
					errs := uint64(math.Round(tc.ber(sec) * bits * math.Exp(0.3*rng.NormFloat64())))
					stats = cloneMap(stats)
					stats["rx_corrected_bits_phy"] += errs
					stats["rx_err_lane_3_phy"] += errs
				}
				b := r.read(ethtoolReading("mlx5-100g-ofed", "p1", "100 Gb/sec (4X)", base.Add(time.Duration(i)*interval), stats))
				if i == 1 {
					p := sampleOf(t, b, "mlx5-100g-ofed", 1, "p1")
					if got, src := schemas.EthernetPHYBits(p); src != schemas.PHYBitsLineRate || got != bits {
						t.Fatalf("PHY bits %g from %s, want %g from the link rate", got, src, bits)
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
			if ev.Type != schemas.TypeBERDrift || ev.Subject.Device != "mlx5-100g-ofed" {
				t.Errorf("event %s about %v", ev.Type, ev.Subject)
			}
			onset, critical := schemas.MillisOf(base.Add(60*time.Minute)), schemas.MillisOf(base.Add(100*time.Minute))
			if ev.DetectedAt <= onset || ev.DetectedAt >= critical {
				t.Errorf("detected at %s, want after the onset %s and before the BER is critical at %s", ev.DetectedAt, onset, critical)
			}
			if ev.Evidence["bits_source"] != "link_rate_x_interval" {
				t.Errorf("evidence bits_source %v, want link_rate_x_interval", ev.Evidence["bits_source"])
			}
			if ev.Evidence["lane"] != 3 {
				t.Errorf("evidence lane %v, want 3 (the lane whose errors grow)", ev.Evidence["lane"])
			}
		})
	}
}
