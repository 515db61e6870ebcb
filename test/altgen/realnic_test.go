package altgen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/eval"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
	"github.com/rdmawatch/rdmawatch/test/altgen"
)

// TestRealNICProfiles is issue 25's "done when": the same fault, generated
// once with the simulators' full counter set and once as each real NIC
// lists it (mlx5 without rx_bits_phy, 802.3x global pause, a RoCE LAG with
// member samples), replayed through the real pipeline, is found in both,
// and no later than tolerance(label) after the full set's detection; the
// real-NIC run raises no more false alarms than the full one. Both
// generators: sim (sim.Config.NIC, BondedHosts) and altgen (Config.NIC).
//
// Tolerance: two intervals for storms and starvation (one reading to see
// the change, one to confirm it); for a BER drift two intervals or a tenth
// of its time to critical, whichever is longer (without rx_bits_phy the
// BER is measured over the line rate, which differs from counted bits by
// the reading's jitter, so a threshold can be crossed a reading later).
// config_mismatch false alarms are not compared: only the global-pause runs
// report a config.
func TestRealNICProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 24 traces (minutes)")
	}
	type gen func(nic string, dir string) (time.Duration, error)
	simGen := func(build func(nic string) sim.Config) gen {
		return func(nic, dir string) (time.Duration, error) {
			c := build(nic)
			_, err := sim.WriteFiles(c, dir, false)
			return c.Interval, err
		}
	}
	altGen := func(preset string, seed uint64, iv time.Duration) gen {
		return func(nic, dir string) (time.Duration, error) {
			c, err := altgen.Preset(preset, seed, iv)
			if err != nil {
				return 0, err
			}
			c.NIC = nic
			return iv, altgen.Generate(c, dir, false)
		}
	}
	start := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// simBase is a small RoCE fleet under a sim profile name; "bonded" is
	// mlx5-upstream with every host but the last of each leaf on a LAG.
	simBase := func(nic string, hosts, perLeaf int, iv, dur time.Duration) sim.Config {
		c := sim.DefaultConfig()
		c.Seed, c.Fabric, c.Start = 2550, "realnic", start
		c.Hosts, c.HostsPerLeaf, c.Interval, c.Duration = hosts, perLeaf, iv, dur
		c.Noise = sim.Noise{JitterFraction: 0.2, IdleFraction: 0.05, Duplicates: 2, Glitches: 2}
		switch nic {
		case altgen.NICBonded:
			c.NIC, c.BondedHosts = sim.NICUpstream, hosts-1
		default:
			p, err := sim.ParseNICProfile(nic)
			if err != nil {
				panic(err)
			}
			c.NIC = p
		}
		return c
	}
	// port is the fault's RDMA port under the profile; phy its PHY sample.
	port := func(nic, node string) sim.PortRef {
		if nic == altgen.NICBonded {
			return sim.BondRef(node, 0)
		}
		return sim.PortRef{Node: node, Device: "mlx5_0", Port: 1}
	}
	phy := func(nic, node string) sim.PortRef {
		if nic == altgen.NICBonded {
			return sim.MemberRef(node, 0, 1)
		}
		return port(nic, node)
	}
	cases := []struct {
		name  string
		types []string // the label types compared
		gen   gen
	}{
		{"sim-ber-drift", []string{schemas.TypeBERDrift}, simGen(func(nic string) sim.Config {
			c := simBase(nic, 6, 3, 10*time.Second, 40*time.Minute)
			c.Faults = []sim.Fault{sim.BERDrift{Port: phy(nic, "gpu-002"), From: at(8*time.Minute + 3300*time.Millisecond),
				ToCritical: 20 * time.Minute, Lane: 1, Noise: 0.25}}
			return c
		})},
		{"sim-pfc-storm", []string{schemas.TypePFCStorm}, simGen(func(nic string) sim.Config {
			c := simBase(nic, 8, 4, 5*time.Second, 12*time.Minute)
			if nic == altgen.NICGlobalPause {
				c.Faults = append(c.Faults, sim.ConfigReport{})
			}
			c.Faults = append(c.Faults, sim.PFCStorm{Port: port(nic, "gpu-002"), From: at(3*time.Minute + 2300*time.Millisecond),
				Duration: 3 * time.Minute, Spread: 300 * time.Millisecond, Remote: 1})
			return c
		})},
		{"sim-starvation", []string{schemas.TypeReceiveStarvation}, simGen(func(nic string) sim.Config {
			c := simBase(nic, 8, 4, 5*time.Second, 14*time.Minute)
			c.Faults = []sim.Fault{
				sim.ReceiveStarvation{Port: port(nic, "gpu-003"), From: at(3*time.Minute + 1100*time.Millisecond), Duration: 4 * time.Minute},
				sim.ReceiveStarvation{Port: port(nic, "gpu-006"), Via: sim.StarveDiscards, From: at(8*time.Minute + 2700*time.Millisecond), Duration: 3 * time.Minute},
			}
			return c
		})},
		{"altgen-ber-roce", []string{schemas.TypeBERDrift}, altGen("ber-roce", 1, 10*time.Second)},
		{"altgen-pfc", []string{schemas.TypePFCStorm}, altGen("pfc", 1, 5*time.Second)},
		{"altgen-starve", []string{schemas.TypeReceiveStarvation, schemas.TypePFCStorm}, altGen("starve", 1, 5*time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			full := filepath.Join(base, altgen.NICFull)
			iv, err := tc.gen(altgen.NICFull, full)
			if err != nil {
				t.Fatal(err)
			}
			want := detections(t, full, iv, tc.types)
			for _, nic := range altgen.NICs[1:] {
				t.Run(nic, func(t *testing.T) {
					dir := filepath.Join(base, nic)
					if _, err := tc.gen(nic, dir); err != nil {
						t.Fatal(err)
					}
					got := detections(t, dir, iv, tc.types)
					if len(got.labels) != len(want.labels) {
						t.Fatalf("%d labels, the full set's run has %d", len(got.labels), len(want.labels))
					}
					for i, l := range got.labels {
						w := want.latency[i]
						if w < 0 {
							t.Logf("%s %s: the full set's run missed it too", l.Type, l.Subject)
							continue
						}
						g := got.latency[i]
						tol := 2 * iv
						if l.Type == schemas.TypeBERDrift && l.CriticalAt != nil {
							tol = max(tol, (time.Duration(*l.CriticalAt-l.Start)*time.Millisecond)/10)
						}
						switch {
						case g < 0:
							t.Errorf("%s %s from %s: missed (full set: found after %s)", l.Type, l.Subject, l.Start, w)
						case g > w+tol:
							t.Errorf("%s %s: found after %s, the full set after %s (tolerance %s)", l.Type, l.Subject, g, w, tol)
						default:
							t.Logf("%s %s: found after %s, the full set after %s", l.Type, l.Subject, g, w)
						}
					}
					if got.falseAlarms > want.falseAlarms {
						t.Errorf("%d false alarms, the full set's run %d: %v", got.falseAlarms, want.falseAlarms, got.falseText)
					}
				})
			}
		})
	}
}

// found is what one replay found of the labels of some types: per label
// (in label order) the latency of its first matching incident, -1 if none;
// and the false alarms of the whole run.
type found struct {
	labels      []schemas.Label
	latency     []time.Duration
	falseAlarms int
	falseText   []string
}

func detections(t *testing.T, dir string, iv time.Duration, types []string) found {
	t.Helper()
	evs, labels, _, err := replayDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var f found
	ins := eval.Incidents(evs)
	for i := range labels {
		l := &labels[i]
		keep := false
		for _, ty := range types {
			keep = keep || l.Type == ty
		}
		if !keep {
			continue
		}
		lat := time.Duration(-1)
		for _, in := range ins {
			if eval.Matches(in, l, iv) {
				d := time.Duration(in.FirstDetected-l.Start) * time.Millisecond
				if lat < 0 || d < lat {
					lat = d
				}
			}
		}
		f.labels, f.latency = append(f.labels, *l), append(f.latency, lat)
	}
	var sum eval.Sum
	rep := sum.Add(dir, evs, labels, eval.Options{Interval: iv})
	for _, fa := range rep.FalseAlarms {
		if fa.Incident.Type == "config_mismatch" {
			// Only the global-pause runs report their config (pfc_enabled
			// []): the full set's run cannot raise one to compare with.
			continue
		}
		f.falseAlarms++
		f.falseText = append(f.falseText, fmt.Sprintf("%s %s", fa.Incident.Type, fa.Incident.Subject))
	}
	if os.Getenv("RDMAWATCH_REALNIC_VERBOSE") != "" {
		for _, in := range ins {
			t.Logf("%s: %s %s detected %s", filepath.Base(dir), in.Type, in.Subject, in.FirstDetected)
		}
	}
	return f
}
