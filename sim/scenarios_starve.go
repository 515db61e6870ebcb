package sim

import "time"

func init() { registerScenario(starvationRNRDiscards) }

// starvationRNRDiscards: the two quieter ways a receiver starves. An RNR
// starvation (RC queue pairs without a posted receive NAK their senders,
// which back off: a low out_of_buffer rate, the senders' rnr_nak_retry_err)
// and a host that does not drain its NIC (rx_discards_phy, a little PFC),
// with every kind of noise elsewhere. 5 s interval.
func starvationRNRDiscards() Scenario {
	c := DefaultConfig()
	c.Seed = 3301
	c.Fabric = "starvation-rnr-discards"
	c.Hosts = 12
	c.IBHosts = 0
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 25 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.3, IdleFraction: 0.1,
		Resets: 2, CollectorRestarts: 2, PortGaps: 2, NodeGaps: 1, GapIntervals: 4,
		Duplicates: 3, Glitches: 3, NearWrap: 2,
	}
	c.Faults = []Fault{
		ReceiveStarvation{Port: PortRef{"gpu-003", "mlx5_0", 1}, Via: StarveRNR,
			Senders: []PortRef{{"gpu-005", "mlx5_0", 1}, {"gpu-007", "mlx5_1", 1}, {"gpu-010", "mlx5_0", 1}},
			From:    scenarioStart.Add(6*time.Minute + 2300*time.Millisecond), Duration: 5 * time.Minute},
		ReceiveStarvation{Port: PortRef{"gpu-008", "mlx5_1", 1}, Via: StarveDiscards,
			From: scenarioStart.Add(15*time.Minute + 800*time.Millisecond), Duration: 4 * time.Minute},
	}
	return Scenario{Name: "starvation-rnr-discards", Gzip: true, Config: c}
}
