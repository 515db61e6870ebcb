package sim

import "time"

func init() {
	registerScenario(pfcStorm5s)
	registerScenario(pfcStorm1s)
	registerScenario(pfcIncastHealthy)
}

// pfcNoise is every kind of collector and fleet noise, a few of each.
func pfcNoise() Noise {
	return Noise{
		JitterFraction: 0.2, IdleFraction: 0.05,
		Resets: 2, CollectorRestarts: 2, PortGaps: 2, NodeGaps: 2, GapIntervals: 3,
		Duplicates: 4, Glitches: 3, NearWrap: 1,
	}
}

// pfcStorm5s: 16 hosts on four leaves read every 5 s for 25 minutes. Three
// storms: one whose origin keeps reporting and whose pause reaches two ports
// on another leaf, one from a hung host that stops reporting, one that dips
// for an interval; incast bursts on the fourth leaf throughout.
func pfcStorm5s() Scenario {
	c := DefaultConfig()
	c.Seed = 2016
	c.Fabric = "pfc-storm"
	c.Hosts = 16
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 25 * time.Minute
	c.Noise = pfcNoise()
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		PFCStorm{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(3*time.Minute + 2300*time.Millisecond),
			Duration: 3 * time.Minute, Spread: 300 * time.Millisecond, Remote: 2},
		PFCStorm{Port: PortRef{"gpu-010", "mlx5_0", 1}, From: at(10*time.Minute + 2100*time.Millisecond),
			Duration: 4 * time.Minute, Spread: 200 * time.Millisecond, MaxAffected: 3, Silent: true},
		PFCStorm{Port: PortRef{"gpu-005", "mlx5_1", 1}, From: at(17*time.Minute + 1700*time.Millisecond),
			Duration: 4 * time.Minute, Spread: 400 * time.Millisecond, MaxAffected: 4,
			DipAt: 90 * time.Second, DipFor: 5 * time.Second},
		Incast{Receiver: PortRef{"gpu-014", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-013", "mlx5_0", 1}, {"gpu-015", "mlx5_1", 1}, {"gpu-016", "mlx5_0", 1}},
			From:    at(time.Minute), Every: 1500 * time.Millisecond, Burst: 600 * time.Millisecond,
			SenderPause: 0.7, ReceiverPause: 0.6},
	}
	return Scenario{Name: "pfc-storm", Gzip: true, Config: c}
}

// pfcStorm1s: 8 hosts on two leaves read every second for 6 minutes: a
// storm whose origin reports, then incast on the other leaf, then a storm
// there from a hung host.
func pfcStorm1s() Scenario {
	c := DefaultConfig()
	c.Seed = 2017
	c.Fabric = "pfc-storm-1s"
	c.Hosts = 8
	c.HostsPerLeaf = 4
	c.Interval = time.Second
	c.Start = scenarioStart
	c.Duration = 6 * time.Minute
	c.Noise = pfcNoise()
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		PFCStorm{Port: PortRef{"gpu-003", "mlx5_1", 1}, From: at(60*time.Second + 450*time.Millisecond),
			Duration: 90 * time.Second, Spread: 50 * time.Millisecond, MaxAffected: 4, Remote: 1},
		Incast{Receiver: PortRef{"gpu-006", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-005", "mlx5_1", 1}, {"gpu-007", "mlx5_0", 1}, {"gpu-008", "mlx5_1", 1}},
			From:    at(20 * time.Second), Duration: 150 * time.Second, Every: 1200 * time.Millisecond, Burst: 500 * time.Millisecond,
			SenderPause: 0.7, ReceiverPause: 0.6},
		PFCStorm{Port: PortRef{"gpu-007", "mlx5_0", 1}, From: at(4*time.Minute + 300*time.Millisecond),
			Duration: 80 * time.Second, Spread: 50 * time.Millisecond, Silent: true},
	}
	return Scenario{Name: "pfc-storm-1s", Gzip: true, Config: c}
}

// pfcIncastHealthy: incast on every leaf and all the noise, no fault: a
// pfc_storm raised here is a false alarm. Read every 2 s, so that a burst
// covers a large share of an interval.
func pfcIncastHealthy() Scenario {
	c := DefaultConfig()
	c.Seed = 2018
	c.Fabric = "pfc-incast-healthy"
	c.Hosts = 12
	c.HostsPerLeaf = 4
	c.Interval = 2 * time.Second
	c.Start = scenarioStart
	c.Duration = 12 * time.Minute
	c.Noise = pfcNoise()
	c.Noise.NodeGaps = 4
	at := func(d time.Duration) time.Time { return scenarioStart.Add(d) }
	c.Faults = []Fault{
		Incast{Receiver: PortRef{"gpu-001", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-002", "mlx5_0", 1}, {"gpu-003", "mlx5_0", 1}, {"gpu-004", "mlx5_1", 1}},
			From:    at(30 * time.Second), Every: 1500 * time.Millisecond, Burst: 700 * time.Millisecond,
			SenderPause: 0.8, ReceiverPause: 0.7},
		Incast{Receiver: PortRef{"gpu-006", "mlx5_1", 1},
			Senders: []PortRef{{"gpu-005", "mlx5_0", 1}, {"gpu-007", "mlx5_1", 1}, {"gpu-009", "mlx5_0", 1}},
			From:    at(2 * time.Minute), Duration: 6 * time.Minute, Every: 3 * time.Second, Burst: time.Second,
			SenderPause: 0.6, ReceiverPause: 0.5},
		Incast{Receiver: PortRef{"gpu-011", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-010", "mlx5_0", 1}, {"gpu-012", "mlx5_1", 1}},
			From:    at(5 * time.Minute), Every: 2 * time.Second, Burst: 400 * time.Millisecond},
	}
	return Scenario{Name: "pfc-incast-healthy", Gzip: true, Config: c}
}
