package altgen

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A drawn physics stays inside physicsRanges, is the same for the same
// seed and fabric, and differs between fabrics.
func TestDrawPhysics(t *testing.T) {
	R := physicsRanges
	in := func(v, lo, hi float64) bool { return v >= lo*(1-1e-12) && v <= hi*(1+1e-12) }
	rateIn := func(r LinkRate, all []LinkRate) bool {
		for _, a := range all {
			if a == r {
				return true
			}
		}
		return false
	}
	tests := []struct {
		name string
		ok   func(ph Physics) bool
	}{
		{"link rates from the table", func(ph Physics) bool {
			for _, r := range ph.EthRates {
				if !rateIn(r, R.EthRates) {
					return false
				}
			}
			for _, r := range ph.IBRates {
				if !rateIn(r, R.IBRates) {
					return false
				}
			}
			return len(ph.EthRates) > 0 && len(ph.IBRates) > 0
		}},
		{"pre-FEC BER 1e-9..1e-7", func(ph Physics) bool {
			return in(ph.EthBERLo, R.EthBER[0], R.EthBER[1]) && in(ph.EthBERHi, ph.EthBERLo, R.EthBER[1])
		}},
		{"IB symbol BER", func(ph Physics) bool {
			return in(ph.IBBERLo, R.IBBER[0], R.IBBER[1]) && in(ph.IBBERHi, ph.IBBERLo, R.IBBER[1])
		}},
		{"doubling time 3..30 min", func(ph Physics) bool {
			return ph.Ramp.Doubling >= R.DoublingMin && ph.Ramp.Doubling <= R.DoublingMax
		}},
		{"accelerating shrink", func(ph Physics) bool {
			return !ph.Ramp.Accelerating && ph.Ramp.Shrink == 0 || in(ph.Ramp.Shrink, R.ShrinkMin, R.ShrinkMax)
		}},
		{"out-of-sequence per loss 1..40", func(ph Physics) bool { return in(ph.OOSPerLoss, 1, 40) }},
		{"labelled loss 1e-6..1e-3", func(ph Physics) bool {
			return ph.LossLo >= R.LabelledLossMin && ph.LossLo <= ph.LossHi && ph.LossHi <= 1e-3
		}},
		{"sub-threshold loss below 1e-6", func(ph Physics) bool {
			return ph.SubThresholdLoss > 0 && ph.SubThresholdLoss < R.LabelledLossMin
		}},
		{"reordering 0..1e-5 per packet", func(ph Physics) bool {
			return in(ph.ReorderShare, 0, 1) && in(ph.ReorderMax, 0, 1e-5)
		}},
		{"utilisation", func(ph Physics) bool { return in(ph.Utilisation, R.Utilisation[0], R.Utilisation[1]) }},
		{"sample jitter", func(ph Physics) bool {
			return in(ph.JitterSec, R.JitterSec[0], R.JitterSec[1]) && in(ph.LateProb, R.LateProb[0], R.LateProb[1])
		}},
		{"NIC profile", func(ph Physics) bool { return validNIC(ph.NIC) && ph.NIC != "" }},
		{"not fixed", func(ph Physics) bool { return !ph.Fixed }},
	}
	shapes := map[bool]int{}
	nics := map[string]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		for _, preset := range Presets {
			ph := DrawPhysics(seed, "alt-"+preset)
			shapes[ph.Ramp.Accelerating]++
			nics[ph.NIC]++
			for _, tt := range tests {
				if !tt.ok(ph) {
					t.Fatalf("seed %d %s: %s: %+v", seed, preset, tt.name, ph)
				}
			}
			if again := DrawPhysics(seed, "alt-"+preset); !reflect.DeepEqual(ph, again) {
				t.Fatalf("seed %d %s: two draws differ:\n%+v\n%+v", seed, preset, ph, again)
			}
		}
	}
	if shapes[true] < 100 || shapes[false] < 100 || len(nics) != len(NICs) {
		t.Errorf("the draws do not spread: shapes %v, NIC profiles %v", shapes, nics)
	}
	if reflect.DeepEqual(DrawPhysics(1, "alt-pfc"), DrawPhysics(2, "alt-pfc")) || reflect.DeepEqual(DrawPhysics(1, "alt-pfc"), DrawPhysics(1, "alt-wide")) {
		t.Error("one physics for different seeds or fabrics")
	}
}

// A drawn ramp reaches critical at the time it reports, within the room
// it is given, its doubling time and shrink inside their ranges.
func TestDriftRamp(t *testing.T) {
	R := physicsRanges
	tests := []struct {
		name       string
		rs         RampShape
		base, crit float64
		room       time.Duration
		wantAccel  bool
	}{
		{"log-linear fits", RampShape{Doubling: 5 * time.Minute}, 1e-7, 1e-6, time.Hour, false},
		{"log-linear shrinks to fit", RampShape{Doubling: 30 * time.Minute}, 1e-8, 1e-6, time.Hour, false},
		{"log-linear turns accelerating", RampShape{Doubling: 10 * time.Minute}, 1e-9, 1e-6, 20 * time.Minute, true},
		{"accelerating fits", RampShape{Accelerating: true, Doubling: 10 * time.Minute, Shrink: 0.8}, 1e-9, 1e-6, time.Hour, true},
		{"IB, far from critical", RampShape{Doubling: 8 * time.Minute}, 1e-17, 1e-12, 40 * time.Minute, true},
		{"no room limit", RampShape{Doubling: 30 * time.Minute}, 1e-9, 1e-6, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, toCrit := driftRamp(tt.rs, tt.base, tt.crit, tt.room)
			if rs.Accelerating != tt.wantAccel {
				t.Errorf("accelerating %v, want %v", rs.Accelerating, tt.wantAccel)
			}
			if rs.Doubling < R.DoublingMin || rs.Doubling > R.DoublingMax || rs.Accelerating && (rs.Shrink < R.ShrinkMin || rs.Shrink > R.ShrinkMax) {
				t.Errorf("ramp out of range: %+v", rs)
			}
			if tt.room > 0 && toCrit > tt.room {
				t.Errorf("critical after %s, room %s", toCrit, tt.room)
			}
			f := &Fault{At: time.Minute, Drawn: rs}
			ln := driftLnBER(f, tt.base, tt.crit, (time.Minute + toCrit).Seconds())
			if math.Abs(ln-math.Log(tt.crit)) > 0.01 {
				t.Errorf("BER at the reported crossing %.3g, want %.3g", math.Exp(ln), tt.crit)
			}
			if before := driftLnBER(f, tt.base, tt.crit, (time.Minute + toCrit/2).Seconds()); before >= math.Log(tt.crit) {
				t.Errorf("critical already halfway: %.3g", math.Exp(before))
			}
		})
	}
}

// Fixed physics (the default) gives the traces altgen gave before the
// physics could be drawn: the hashes of trace, topology and labels were
// taken with the generator as of commit 9392132.
func TestFixedPhysicsUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 8 traces")
	}
	tests := []struct {
		preset string
		seed   uint64
		iv     time.Duration
		nic    string
		sha    string
	}{
		{"healthy", 4, 10 * time.Second, "", "6d9947dbd1261cb2707fe9f2dd97f30683252c4c486478b6a265d3ced72194b2"},
		{"layers", 1, 10 * time.Second, "", "a7adedf71630bd824ac52a1fb3bc5101020f81375e3c8ebb59529aa60df6f41e"},
		{"retrans", 2, 5 * time.Second, "", "a92e421fc3bb922bae53a00f841ee861f7c81238af8ab3ca5a404ed876652979"},
		{"ber-roce", 3, 10 * time.Second, NICBonded, "3549f5611827841e794e049af96a74bf070b3dc220216453a801a544715d5754"},
		{"ber-ib", 1, 10 * time.Second, "", "4bb16352959e3b92730f5ff1f0ca1e76434ba46607c000de45dc7f58925183bf"},
		{"misconfig", 9, 10 * time.Second, NICGlobalPause, "f790f5896ae03802eb9550b1f52c0d4f15f7775512c47569e04a156a3f52ce84"},
		{"starve", 5, 10 * time.Second, NICUpstream, "09d3dadcd96a5ab46a025a4b1229a6c364b0cad4bfa73e5c190fee435e903d51"},
		{"pfc", 1, 5 * time.Second, "", "3c4e54fa97fa8b08dc076fdbdde2886e4d2f16631d17bb2b1e902b6ae4cdddd0"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d/%s", tt.preset, tt.seed, tt.iv), func(t *testing.T) {
			t.Parallel()
			cfg, err := Preset(tt.preset, tt.seed, tt.iv)
			if err != nil {
				t.Fatal(err)
			}
			cfg.NIC = tt.nic
			if got := genHash(t, cfg); got != tt.sha {
				t.Errorf("sha256 %s, want %s", got, tt.sha)
			}
			// Pinned outright: the same.
			fixed := FixedPhysics()
			cfg.Physics = &fixed
			if got := genHash(t, cfg); got != tt.sha {
				t.Errorf("with Physics = FixedPhysics(): sha256 %s, want %s", got, tt.sha)
			}
		})
	}
}

func genHash(t *testing.T, cfg Config) string {
	t.Helper()
	dir := t.TempDir()
	if err := Generate(cfg, dir, false); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, f := range []string{"trace.jsonl", "topology.json", "labels.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// Drawn physics: one trace per seed, another than fixed physics gives,
// and labels that tell the truth about it: a labelled lossy link loses at
// least 1e-6 for at least 2 minutes on a port without reordering of its
// own; the unlabelled loss is below that; a drift's critical_at is where
// its drawn ramp crosses critical.
func TestRandomPhysics(t *testing.T) {
	if testing.Short() {
		t.Skip("generates traces")
	}
	for _, tt := range []struct {
		preset string
		seed   uint64
	}{{"retrans", 1}, {"retrans", 7}, {"wide", 2}, {"ber-roce", 4}, {"ber-ib", 5}, {"mix", 3}} {
		t.Run(fmt.Sprintf("%s/%d", tt.preset, tt.seed), func(t *testing.T) {
			t.Parallel()
			cfg, err := Preset(tt.preset, tt.seed, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			fixed := genHash(t, cfg)
			cfg.RandomPhysics = true
			if tt.preset == "retrans" || tt.preset == "ber-roce" {
				a, b := genHash(t, cfg), genHash(t, cfg)
				if a != b {
					t.Fatal("drawn physics: two runs of one seed differ")
				}
				if a == fixed {
					t.Fatal("drawn physics gives the fixed trace")
				}
			}
			g := newGen(cfg)
			if g.ph.Fixed {
				t.Fatal("no physics drawn")
			}
			labelled := map[string]Label{}
			for _, l := range g.labels {
				labelled[l.Type+"|"+fmt.Sprint(l.Subject)] = l
			}
			on := map[*port]float64{}
			for _, e := range g.events {
				if e.what != "loss" {
					continue
				}
				if e.v > 0 {
					on[e.p] = e.at
					_, lab := labelled[Retransmissions+"|"+fmt.Sprint(g.subject(e.p))]
					if lab && (e.v < 1e-6 || e.p.app.reorder != 0) {
						t.Errorf("%s: labelled loss %.3g, reordering %.3g", e.p.node, e.v, e.p.app.reorder)
					}
					if !lab && e.v >= 1e-6 {
						t.Errorf("%s: unlabelled loss %.3g", e.p.node, e.v)
					}
					continue
				}
				if _, lab := labelled[Retransmissions+"|"+fmt.Sprint(g.subject(e.p))]; lab && e.at-on[e.p] < 120 {
					t.Errorf("%s: labelled loss for %.0f s", e.p.node, e.at-on[e.p])
				}
			}
			for _, p := range g.ports {
				d := p.drift
				if d == nil {
					continue
				}
				crit := physicsRanges.CriticalEth
				if p.ib {
					crit = physicsRanges.CriticalIB
				}
				if d.Drawn.Doubling == 0 {
					t.Fatalf("%s: drift without a drawn ramp", p.node)
				}
				l, ok := labelled["ber_drift|"+fmt.Sprint(g.phySubject(p))]
				if !ok {
					t.Fatalf("%s: drift without a label", p.node)
				}
				ca, _ := time.Parse("2006-01-02T15:04:05.000Z", l.CriticalAt)
				sec := ca.Sub(g.cfg.Start).Seconds()
				if ln := driftLnBER(d, p.driftBase, crit, sec); math.Abs(ln-math.Log(crit)) > 0.01 {
					t.Errorf("%s: BER at critical_at %.3g, want %.3g", p.node, math.Exp(ln), crit)
				}
				if sec > g.cfg.Duration.Seconds() {
					t.Errorf("%s: critical_at after the trace", p.node)
				}
			}
		})
	}
}
