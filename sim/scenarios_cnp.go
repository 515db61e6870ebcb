package sim

import "time"

func init() {
	registerScenario(cnpNPDisabled)
	registerScenario(cnpRPIgnoring)
	registerScenario(cnpFabricLoss)
}

// cnpNPDisabled: one RoCE port stops sending CNPs (notification point off)
// for 8 minutes while the rest of the fleet is congested as usual and
// answers its ECN marks; every kind of noise elsewhere. 5 s interval.
func cnpNPDisabled() Scenario {
	c := DefaultConfig()
	c.Seed = 3101
	c.Fabric = "cnp-np-disabled"
	c.Hosts = 12
	c.IBHosts = 2
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 20 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.3, IdleFraction: 0.1,
		Resets: 2, CollectorRestarts: 2, PortGaps: 2, NodeGaps: 1, GapIntervals: 4,
		Duplicates: 3, Glitches: 3, NearWrap: 2,
	}
	c.Faults = []Fault{
		CNPECNImbalance{Kind: NPDisabled, Port: PortRef{"gpu-004", "mlx5_1", 1},
			From: scenarioStart.Add(6*time.Minute + 3100*time.Millisecond), Duration: 8 * time.Minute, MarkedPerSecond: 3000},
	}
	return Scenario{Name: "cnp-np-disabled", Gzip: true, Config: c}
}

// cnpRPIgnoring: a sender's reaction point ignores the CNPs it receives for
// 6 minutes; 2 s interval, noise elsewhere.
func cnpRPIgnoring() Scenario {
	c := DefaultConfig()
	c.Seed = 3102
	c.Fabric = "cnp-rp-ignoring"
	c.Hosts = 8
	c.DevicesPerHost = 1
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Interval = 2 * time.Second
	c.Duration = 15 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.2, IdleFraction: 0.1,
		Resets: 1, CollectorRestarts: 1, PortGaps: 2, NodeGaps: 1, GapIntervals: 5,
		Duplicates: 2, Glitches: 2,
	}
	c.Faults = []Fault{
		CNPECNImbalance{Kind: RPIgnoring, Port: PortRef{"gpu-006", "mlx5_0", 1},
			From: scenarioStart.Add(5*time.Minute + 700*time.Millisecond), Duration: 6 * time.Minute},
	}
	return Scenario{Name: "cnp-rp-ignoring", Gzip: true, Config: c}
}

// cnpFabricLoss: the network drops 40% of the CNPs for 10 minutes. The
// fault balances the fabric's CNPs outside the loss, so it covers every RoCE
// port and the noise goes to the InfiniBand hosts only. 10 s interval.
func cnpFabricLoss() Scenario {
	c := DefaultConfig()
	c.Seed = 3103
	c.Fabric = "cnp-fabric-loss"
	c.Hosts = 14
	c.IBHosts = 2
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Interval = 10 * time.Second
	c.Duration = 25 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.3, IdleFraction: 0.1,
		Resets: 1, CollectorRestarts: 1, PortGaps: 1, NodeGaps: 1, GapIntervals: 3, Duplicates: 2, Glitches: 1,
	}
	c.Faults = []Fault{
		CNPECNImbalance{Kind: FabricCNPLoss, From: scenarioStart.Add(8*time.Minute + 4500*time.Millisecond),
			Duration: 10 * time.Minute, LossFraction: 0.4},
	}
	return Scenario{Name: "cnp-fabric-loss", Gzip: true, Config: c}
}
