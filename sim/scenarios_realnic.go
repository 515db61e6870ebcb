package sim

import "time"

func init() {
	registerScenario(realNICUpstream)
	registerScenario(realNICGlobalPause)
	registerScenario(realNICBondBER)
	registerScenario(realNICBondHealthy)
}

// realNICNoise is the collector and fleet noise of the real-NIC scenarios:
// a little of each kind.
func realNICNoise() Noise {
	return Noise{
		JitterFraction: 0.2, IdleFraction: 0.05,
		Resets: 1, CollectorRestarts: 1, PortGaps: 1, NodeGaps: 1, GapIntervals: 3,
		Duplicates: 2, Glitches: 2,
	}
}

// realNICUpstream: 8 RoCE hosts whose mlx5 driver (upstream 5.15/6.5 or
// MLNX_OFED 5.x) lists no rx_bits_phy, read every 10 s for an hour. One
// optic drifts log-linearly to 1e-6 pre-FEC in 30 min; a link with a high
// but stable BER beside it; a receiver that stops posting buffers
// (out_of_buffer) and a host that does not drain its NIC (rx_discards_phy,
// a little PFC).
func realNICUpstream() Scenario {
	c := DefaultConfig()
	c.Seed = 2501
	c.Fabric = "realnic-upstream"
	c.Hosts = 8
	c.DevicesPerHost = 1
	c.HostsPerLeaf = 4
	c.RatesGbps = []int{200, 100}
	c.NIC = NICUpstream
	c.Start = scenarioStart
	c.Interval = 10 * time.Second
	c.Duration = time.Hour
	c.Noise = realNICNoise()
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		BERDrift{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(15*time.Minute + 4100*time.Millisecond),
			ToCritical: 30 * time.Minute, Lane: 2, Noise: 0.25},
		BERLevel{Port: PortRef{"gpu-004", "mlx5_0", 1}, Scale: 30},
		ReceiveStarvation{Port: PortRef{"gpu-006", "mlx5_0", 1}, From: at(20*time.Minute + 2600*time.Millisecond), Duration: 5 * time.Minute},
		ReceiveStarvation{Port: PortRef{"gpu-007", "mlx5_0", 1}, Via: StarveDiscards,
			From: at(40*time.Minute + 7300*time.Millisecond), Duration: 5 * time.Minute},
	}
	return Scenario{Name: "realnic-upstream", Gzip: true, Config: c}
}

// realNICGlobalPause: 8 RoCE hosts x 2 ports on a fabric with IEEE 802.3x
// global pause (no per-priority pause counters, pfc_enabled [] in the
// config every host reports), no rx_bits_phy, 5 s for 20 min. A storm
// whose pause reaches the leaf and one port of the other leaf; a receiver
// that stops posting buffers; a host that does not drain its NIC; incast on
// the other leaf throughout (no label: congestion, not a storm).
func realNICGlobalPause() Scenario {
	c := DefaultConfig()
	c.Seed = 2502
	c.Fabric = "realnic-global-pause"
	c.Hosts = 8
	c.HostsPerLeaf = 4
	c.NIC = NICGlobalPause
	c.Start = scenarioStart
	c.Duration = 20 * time.Minute
	c.Noise = realNICNoise()
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		ConfigReport{MTU: 4200, Priority: 3},
		PFCStorm{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(3*time.Minute + 2300*time.Millisecond),
			Duration: 3 * time.Minute, Spread: 300 * time.Millisecond, Remote: 1},
		ReceiveStarvation{Port: PortRef{"gpu-006", "mlx5_1", 1}, From: at(9*time.Minute + 1400*time.Millisecond), Duration: 4 * time.Minute},
		ReceiveStarvation{Port: PortRef{"gpu-007", "mlx5_0", 1}, Via: StarveDiscards,
			From: at(14*time.Minute + 3800*time.Millisecond), Duration: 4 * time.Minute},
		Incast{Receiver: PortRef{"gpu-005", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-008", "mlx5_1", 1}, {"gpu-006", "mlx5_0", 1}},
			From:    at(time.Minute), Every: 2 * time.Second, Burst: 500 * time.Millisecond,
			SenderPause: 0.6, ReceiverPause: 0.5},
	}
	return Scenario{Name: "realnic-global-pause", Gzip: true, Config: c}
}

// realNICBondBER: 6 RoCE hosts, the first 4 on a RoCE LAG (mlx5_bond_0
// over two member netdevs, each sampled for its PHY statistics), no
// rx_bits_phy, 10 s for 50 min. One member's optic drifts to 1e-6 pre-FEC
// in 25 min (its bond's other member stays clean); another member has a
// high but stable BER.
func realNICBondBER() Scenario {
	c := DefaultConfig()
	c.Seed = 2503
	c.Fabric = "realnic-bond-ber"
	c.Hosts = 6
	c.HostsPerLeaf = 3
	c.BondedHosts = 4
	c.NIC = NICUpstream
	c.Start = scenarioStart
	c.Interval = 10 * time.Second
	c.Duration = 50 * time.Minute
	c.Noise = realNICNoise()
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		BERDrift{Port: MemberRef("gpu-002", 0, 1), From: at(12*time.Minute + 6200*time.Millisecond),
			ToCritical: 25 * time.Minute, Lane: 0, Noise: 0.25},
		BERLevel{Port: MemberRef("gpu-003", 0, 0), Scale: 30},
	}
	return Scenario{Name: "realnic-bond-ber", Gzip: true, Config: c}
}

// realNICBondHealthy: 8 RoCE hosts, 6 of them bonded, no rx_bits_phy, 5 s
// for 16 min, no fault: the mlx5 driver of one bonded host is reloaded
// halfway (every counter of the bond and its members restarts from zero)
// and the usual noise elsewhere. Anything raised is a false alarm.
func realNICBondHealthy() Scenario {
	c := DefaultConfig()
	c.Seed = 2504
	c.Fabric = "realnic-bond-healthy"
	c.Hosts = 8
	c.HostsPerLeaf = 4
	c.BondedHosts = 6
	c.NIC = NICUpstream
	c.Start = scenarioStart
	c.Duration = 16 * time.Minute
	c.Noise = realNICNoise()
	c.Faults = []Fault{
		DriverReload{Node: "gpu-003", At: scenarioStart.Add(8*time.Minute + 1700*time.Millisecond)},
	}
	return Scenario{Name: "realnic-bond-healthy", Gzip: true, Config: c}
}
