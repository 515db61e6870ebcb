package sim

import "time"

func init() {
	registerScenario(berDriftRoCE)
	registerScenario(berDriftIB)
}

// berDriftRoCE: 12 RoCE hosts read every 10 s for 2 h 40 min. Three optics
// drift: two reach 1e-6 pre-FEC in 40 min (one of them is replaced 55 min
// after its onset), one takes 2 h. Around them, healthy links at very
// different steady BERs (1e-12 up to a high but stable ~5e-7) and the
// usual collector noise: none of those may raise ber_drift.
func berDriftRoCE() Scenario {
	c := DefaultConfig()
	c.Seed = 4011
	c.Fabric = "ber-drift-roce"
	c.Hosts = 12
	c.IBHosts = 0
	c.DevicesPerHost = 1
	c.HostsPerLeaf = 6
	c.RatesGbps = []int{200, 100}
	c.Start = scenarioStart
	c.Interval = 10 * time.Second
	c.Duration = 2*time.Hour + 40*time.Minute
	c.Noise = Noise{
		JitterFraction: 0.2, IdleFraction: 0.1,
		Resets: 1, CollectorRestarts: 1, PortGaps: 2, NodeGaps: 1, GapIntervals: 6,
		Duplicates: 3, Glitches: 3,
	}
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		BERDrift{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(40*time.Minute + 3500*time.Millisecond),
			ToCritical: 40 * time.Minute, Until: at(95 * time.Minute), Lane: 1, Noise: 0.25},
		BERDrift{Port: PortRef{"gpu-005", "mlx5_0", 1}, From: at(30*time.Minute + 7200*time.Millisecond),
			ToCritical: 2 * time.Hour, Lane: 2, Noise: 0.25},
		BERDrift{Port: PortRef{"gpu-009", "mlx5_0", 1}, From: at(85*time.Minute + 1100*time.Millisecond),
			ToCritical: 40 * time.Minute, Lane: 3, Noise: 0.25},
		BERLevel{Port: PortRef{"gpu-003", "mlx5_0", 1}, Scale: 0.001},
		BERLevel{Port: PortRef{"gpu-004", "mlx5_0", 1}, Scale: 50},
		BERLevel{Port: PortRef{"gpu-007", "mlx5_0", 1}, Scale: 0.02},
		BERLevel{Port: PortRef{"gpu-011", "mlx5_0", 1}, Scale: 10},
	}
	return Scenario{Name: "ber-drift-roce", Gzip: true, Config: c}
}

// berDriftIB: 8 InfiniBand hosts read every 5 s for 100 min, where symbol
// errors are sparse: two links drift (40 min and 60 min to a symbol BER of
// 1e-12) from a clean 1e-15; one link has steady symbol errors (a few a
// minute), one a rare one. (A pinned symbol_error is covered by the
// detector's unit tests: here it would be a counter_saturated label.)
func berDriftIB() Scenario {
	c := DefaultConfig()
	c.Seed = 4012
	c.Fabric = "ber-drift-ib"
	c.Hosts = 8
	c.IBHosts = 8
	c.DevicesPerHost = 1
	c.HostsPerLeaf = 4
	c.RatesGbps = []int{200, 100}
	c.Start = scenarioStart
	c.Interval = 5 * time.Second
	c.Duration = 100 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.2, IdleFraction: 0.1,
		Resets: 1, CollectorRestarts: 1, PortGaps: 1, GapIntervals: 4,
		Duplicates: 3, Glitches: 2,
	}
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		BERDrift{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(35*time.Minute + 2200*time.Millisecond),
			ToCritical: 40 * time.Minute, Noise: 0.25},
		BERDrift{Port: PortRef{"gpu-006", "mlx5_0", 1}, From: at(30*time.Minute + 900*time.Millisecond),
			ToCritical: 60 * time.Minute, Noise: 0.25},
		BERLevel{Port: PortRef{"gpu-004", "mlx5_0", 1}, SymbolBER: 2e-13},
		BERLevel{Port: PortRef{"gpu-007", "mlx5_0", 1}, SymbolBER: 3e-15},
	}
	return Scenario{Name: "ber-drift-ib", Gzip: true, Config: c}
}
