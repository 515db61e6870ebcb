package sim

import (
	"sort"
	"time"
)

// Scenario is a named config whose output is checked in under
// test/scenarios/<Name>/.
type Scenario struct {
	Name string
	// Gzip stores the trace as trace.jsonl.gz.
	Gzip   bool
	Config Config
}

var scenarioStart = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)

// scenarioFuncs are the scenario builders; files add theirs in init() with
// registerScenario, so each fault's scenarios live next to each other.
var scenarioFuncs = []func() Scenario{exampleFleet, healthyNoisy, flapAndSaturation}

func registerScenario(f func() Scenario) { scenarioFuncs = append(scenarioFuncs, f) }

// Scenarios lists the checked-in scenarios by name.
func Scenarios() []Scenario {
	s := make([]Scenario, 0, len(scenarioFuncs))
	for _, f := range scenarioFuncs {
		s = append(s, f())
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	return s
}

// ScenarioByName finds a checked-in scenario.
func ScenarioByName(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// exampleFleet is what `make run` replays: 16 hosts (RoCE, the last two on
// InfiniBand), 20 minutes at 5 s, one link flap, one counter climbing to
// saturation, and every kind of noise once or twice.
func exampleFleet() Scenario {
	c := DefaultConfig()
	c.Seed = 20260314
	c.Fabric = "example-fleet"
	c.Hosts = 16
	c.IBHosts = 2
	c.DevicesPerHost = 2
	c.RatesGbps = []int{200, 200, 100}
	c.Start = scenarioStart
	c.Duration = 20 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.2, IdleFraction: 0.06,
		Resets: 1, CollectorRestarts: 1, PortGaps: 1, NodeGaps: 1, GapIntervals: 4,
		Duplicates: 3, Glitches: 2, NearWrap: 2,
	}
	c.Faults = []Fault{
		LinkFlap{Port: PortRef{"gpu-005", "mlx5_1", 1}, At: scenarioStart.Add(7*time.Minute + 2300*time.Millisecond), Down: 4 * time.Second},
		CounterSaturated{Port: PortRef{"gpu-011", "mlx5_0", 1}, Counter: "symbol_error",
			From: scenarioStart.Add(9 * time.Minute), Initial: 65200, PerSecond: 1.5},
	}
	return Scenario{Name: "example-fleet", Gzip: true, Config: c}
}

// healthyNoisy has every kind of noise and no fault: a detector that raises
// anything here raises a false alarm.
func healthyNoisy() Scenario {
	c := DefaultConfig()
	c.Seed = 7
	c.Fabric = "healthy-noisy"
	c.Hosts = 10
	c.IBHosts = 2
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 15 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.4, IdleFraction: 0.1,
		Resets: 2, CollectorRestarts: 2, PortGaps: 2, NodeGaps: 1, GapIntervals: 3,
		Duplicates: 4, Glitches: 3, NearWrap: 2,
	}
	return Scenario{Name: "healthy-noisy", Gzip: true, Config: c}
}

// flapAndSaturation is the end-to-end test's input: four RoCE hosts and two
// InfiniBand hosts, 10 minutes, exactly one link flap and one
// counter_saturated (an InfiniBand link_error_recovery counter that pins at
// 255 and is cleared four minutes later).
func flapAndSaturation() Scenario {
	c := DefaultConfig()
	c.Seed = 42
	c.Fabric = "flap-and-saturation"
	c.Hosts = 6
	c.IBHosts = 2
	c.DevicesPerHost = 1
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 10 * time.Minute
	c.Noise = Noise{JitterFraction: 0.1}
	c.Faults = []Fault{
		LinkFlap{Port: PortRef{"gpu-002", "mlx5_0", 1}, At: scenarioStart.Add(3*time.Minute + 1200*time.Millisecond), Down: 3 * time.Second},
		CounterSaturated{Port: PortRef{"gpu-006", "mlx5_0", 1}, Counter: "link_error_recovery",
			From: scenarioStart.Add(2 * time.Minute), Initial: 230, PerSecond: 0.25,
			ClearAt: scenarioStart.Add(8 * time.Minute)},
	}
	return Scenario{Name: "flap-and-saturation", Config: c}
}
