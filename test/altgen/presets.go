package altgen

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Presets are the preset names, in the order a sweep runs them.
var Presets = []string{"healthy", "pfc", "cnp", "ber-roce", "ber-ib", "retrans", "starve", "mix", "wide"}

// Preset returns a named trace configuration; the seed varies sizes, link
// layers, fault times and parameters within the preset.
func Preset(name string, seed uint64, interval time.Duration) (Config, error) {
	r := rand.New(rand.NewPCG(seed, 77))
	m := func(a, b int) time.Duration { return time.Duration(a+r.IntN(b-a+1)) * time.Minute }
	cfg := Config{Seed: seed, Fabric: "alt-" + name, Interval: interval, Noise: true, PortsPerHost: 1 + r.IntN(2)}
	switch name {
	case "healthy":
		cfg.Duration = m(40, 70)
		cfg.Leaves, cfg.HostsPerLeaf = 3, 4+r.IntN(3)
		cfg.IBLeaves = r.IntN(4)
		cfg.SaturatedFromStart = true
		cfg.StableHighBER = true
		cfg.Faults = []Fault{{Kind: LinkDown, At: m(10, 30), Dur: time.Duration(20+r.IntN(160)) * time.Second, Port: -1}}
	case "pfc":
		cfg.Duration = m(20, 30)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 3, 4+r.IntN(3), 0
		cfg.Faults = []Fault{
			{Kind: PFCStorm, At: m(3, 6), Dur: time.Duration(60+r.IntN(200)) * time.Second, Port: -1},
			{Kind: PFCStormSilent, At: m(10, 13), Dur: time.Duration(60+r.IntN(200)) * time.Second, Port: -1},
			{Kind: PFCStorm, At: m(17, 19), Dur: time.Duration(60+r.IntN(120)) * time.Second, Port: -1},
		}
	case "ber-roce", "ber-ib":
		cfg.Duration = m(110, 130)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.PortsPerHost = 2, 3+r.IntN(2), 1
		kind := BERDrift
		if name == "ber-ib" {
			cfg.IBLeaves = 2
			kind = BERDriftIB
		}
		cfg.StableHighBER = true
		cfg.Faults = []Fault{
			{Kind: kind, At: m(35, 45), Ramp: m(20, 70), Port: -1},
			{Kind: kind, At: m(40, 60), Ramp: m(30, 60), Port: -1},
		}
	case "cnp":
		cfg.Duration = m(30, 40)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 3, 4+r.IntN(3), 0
		cfg.Faults = []Fault{
			{Kind: NPDisabled, At: m(6, 9), Dur: m(5, 8), Port: -1},
			{Kind: RPIgnoring, At: m(8, 12), Dur: m(5, 8), Port: -1},
			{Kind: CNPLoss, At: m(20, 24), Dur: m(5, 8)},
		}
	case "mix":
		cfg.Duration = m(100, 120)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 4, 4, 1+r.IntN(2)
		cfg.SaturatedFromStart = true
		cfg.StableHighBER = true
		cfg.Faults = []Fault{
			{Kind: PFCStorm, At: m(10, 20), Dur: time.Duration(60+r.IntN(200)) * time.Second, Port: -1},
			{Kind: PFCStormSilent, At: m(50, 60), Dur: time.Duration(60+r.IntN(200)) * time.Second, Port: -1},
			{Kind: BERDrift, At: m(40, 50), Ramp: m(20, 60), Port: -1},
			{Kind: BERDriftIB, At: m(40, 50), Ramp: m(30, 60), Port: -1},
			{Kind: NPDisabled, At: m(25, 30), Dur: m(5, 8), Port: -1},
			{Kind: RPIgnoring, At: m(65, 70), Dur: m(5, 8), Port: -1},
			{Kind: CNPLoss, At: m(80, 85), Dur: m(5, 8)},
		}
	case "retrans":
		cfg.Duration = m(45, 60)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 3, 4+r.IntN(3), r.IntN(2)
		cfg.Faults = []Fault{
			{Kind: RetransBER, At: m(5, 8), Ramp: m(15, 25)},
			{Kind: Retransmissions, At: m(8, 12), Dur: m(3, 8)},
			{Kind: Retransmissions, At: m(38, 42), Dur: m(3, 6)},
		}
	case "starve":
		cfg.Duration = m(58, 62)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 3, 4+r.IntN(3), r.IntN(2)
		cfg.Faults = []Fault{
			{Kind: ReceiveStarvation, At: m(6, 9), Dur: m(3, 6)},
			{Kind: StarvationStorm, At: m(15, 18), Dur: m(3, 5)},
			{Kind: CompletionErrors, At: m(24, 27), Dur: m(3, 6)},
			{Kind: ReceiveStarvation, At: m(33, 36), Dur: m(2, 4)},
			{Kind: StarvationRNR, At: m(42, 45), Dur: m(3, 5)},
			{Kind: StarvationDiscards, At: m(50, 53), Dur: m(3, 5)},
		}
	case "wide":
		// A wide RoCE fabric: storms whose victims on other leaves come
		// late, a starving receiver that turns into a storm, and the
		// congestion-control faults, over many leaves.
		cfg.Duration = m(40, 50)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 6+r.IntN(3), 6+r.IntN(3), 0
		cfg.Faults = []Fault{
			{Kind: PFCStorm, At: m(4, 7), Dur: time.Duration(90+r.IntN(200)) * time.Second, Port: -1},
			{Kind: StarvationStorm, At: m(12, 15), Dur: m(3, 5)},
			{Kind: PFCStorm, At: m(22, 25), Dur: time.Duration(90+r.IntN(200)) * time.Second, Port: -1},
			{Kind: NPDisabled, At: m(28, 30), Dur: m(4, 6), Port: -1},
			{Kind: Retransmissions, At: m(33, 36), Dur: m(3, 5)},
		}
	case "layers":
		// Compact, for the scenario library: one of each transport and
		// application fault, two cause chains.
		cfg.Duration = m(26, 28)
		cfg.Leaves, cfg.HostsPerLeaf, cfg.PortsPerHost, cfg.IBLeaves = 3, 3, 1, 0
		cfg.Faults = []Fault{
			{Kind: RetransBER, At: m(1, 2), Ramp: m(14, 16)},
			{Kind: StarvationStorm, At: m(4, 6), Dur: m(3, 4)},
			{Kind: CompletionErrors, At: m(15, 17), Dur: m(2, 3)},
			{Kind: Retransmissions, At: m(19, 21), Dur: m(2, 3)},
		}
	case "misconfig":
		misconfigPreset(&cfg, r)
	default:
		return cfg, fmt.Errorf("unknown preset %q", name)
	}
	return cfg, nil
}
