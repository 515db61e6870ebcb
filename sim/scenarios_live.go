package sim

import (
	"fmt"
	"sort"
	"time"
)

// LiveScenario is a fleet meant to be run live (rdmawatch run, rdmawatch
// collector --source sim), paced in accelerated time: faults on a schedule,
// no checked-in trace (an hour of 64 hosts is far too big to keep).
type LiveScenario struct {
	Name        string
	Description string
	Config      Config
	// Speed is how many seconds of data time pass per wall second by
	// default.
	Speed float64
}

// DefaultLiveScenario is what `rdmawatch run` runs without --trace.
const DefaultLiveScenario = "live-fleet"

var liveFuncs = []func() LiveScenario{liveFleet, liveShort}

// LiveScenarios lists the live scenarios by name.
func LiveScenarios() []LiveScenario {
	s := make([]LiveScenario, 0, len(liveFuncs))
	for _, f := range liveFuncs {
		s = append(s, f())
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	return s
}

// LiveScenarioByName finds a live scenario.
func LiveScenarioByName(name string) (LiveScenario, bool) {
	for _, s := range LiveScenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return LiveScenario{}, false
}

// LiveConfig is a healthy fleet of hosts (an eighth of them, at least one
// when there are eight or more, on InfiniBand; the rest RoCE), two devices a
// host, eight hosts a leaf, read every interval for duration from start,
// with the collector noise a production fleet shows. No faults.
func LiveConfig(hosts int, interval, duration time.Duration, start time.Time) Config {
	c := DefaultConfig()
	c.Seed = uint64(start.Unix())
	c.Fabric = "live"
	c.Hosts = hosts
	c.IBHosts = hosts / 8
	c.DevicesPerHost = 2
	c.RatesGbps = []int{200, 200, 100, 400}
	c.HostsPerLeaf = 8
	c.Spines = max(2, min(16, hosts/16))
	c.Start = start.UTC().Truncate(time.Second)
	c.Interval = interval
	c.Duration = duration
	// A live collector never sends a line twice (that is the stream's
	// redelivery, which the live pipeline does for real) and reads whole
	// scrapes; driver reloads, collector restarts and a node that goes
	// quiet for a while do happen.
	c.Noise = Noise{
		JitterFraction: 0.2, IdleFraction: 0.05,
		Resets: max(1, hosts/32), CollectorRestarts: max(1, hosts/32), NodeGaps: 1, GapIntervals: 3,
		Glitches: 2, NearWrap: 2,
	}
	return c
}

// liveStart is the data time a live scenario starts at: fixed, so a run's
// incident ids are the same every time.
var liveStart = time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC)

// liveFleet: 64 hosts (56 RoCE, 8 InfiniBand) on eight leaves, two ports a
// host, read every 10 s for two hours of data time, played at 90x (80 s
// wall). On a schedule: a PFC storm from a host that stops draining its
// queues (12 min in, for 4 min, pausing its leaf and one port beyond it),
// an optic that starts to drift 15 min in and would reach a pre-FEC BER of
// 1e-6 40 min later (replaced at 80 min), a notification point switched
// off by configuration for 10 min from 35 min in (a second cause chain), and an application on gpu-036 that stops
// posting receive buffers 50 min in, its port's PFC storm 100 s later (a
// cause chain). Incast on another leaf all along is the
// congestion that must not raise anything.
func liveFleet() LiveScenario {
	c := LiveConfig(64, 10*time.Second, 2*time.Hour, liveStart)
	c.Seed = 64
	c.Fabric = "live-fleet"
	at := func(d time.Duration) time.Time { return liveStart.Add(d) }
	c.Faults = []Fault{
		PFCStorm{Port: PortRef{"gpu-012", "mlx5_0", 1}, From: at(12*time.Minute + 2300*time.Millisecond),
			Duration: 4 * time.Minute, Spread: 300 * time.Millisecond, MaxAffected: 4, Remote: 1},
		BERDrift{Port: PortRef{"gpu-027", "mlx5_1", 1}, From: at(15*time.Minute + 3100*time.Millisecond),
			ToCritical: 40 * time.Minute, Until: at(80 * time.Minute), Lane: 2, Noise: 0.25},
		// Every host reports its ports' configuration; gpu-041's ECN
		// notification point is switched off by configuration for 10 min:
		// config_mismatch, and the cnp_ecn_imbalance it causes names it.
		ConfigReport{MTU: 4200, Priority: 3},
		Misconfig{Kind: MisconfigNPOff, Port: PortRef{"gpu-041", "mlx5_0", 1},
			From: at(35*time.Minute + 1700*time.Millisecond), Duration: 10 * time.Minute},
		// An application on gpu-036 stops posting receive buffers 50 min in;
		// 100 s later its queue backs up into the NIC, which pauses the leaf:
		// the storm's event names the starvation as its cause.
		ReceiveStarvation{Port: PortRef{"gpu-036", "mlx5_0", 1}, From: at(50*time.Minute + 1900*time.Millisecond),
			Duration: 8 * time.Minute, PerSecond: 1500, StormAfter: 100 * time.Second, StormFor: 4 * time.Minute,
			Spread: 300 * time.Millisecond, MaxAffected: 3, Remote: 1},
		Incast{Receiver: PortRef{"gpu-050", "mlx5_0", 1},
			Senders: []PortRef{{"gpu-049", "mlx5_0", 1}, {"gpu-051", "mlx5_1", 1}, {"gpu-053", "mlx5_0", 1}},
			From:    at(5 * time.Minute), Every: 1500 * time.Millisecond, Burst: 600 * time.Millisecond,
			SenderPause: 0.7, ReceiverPause: 0.6},
	}
	return LiveScenario{Name: "live-fleet", Speed: 90, Config: c,
		Description: "64 hosts, 2 h at 10 s played at 90x: a PFC storm, a drifting optic, a notification point switched off by configuration, a starved receiver and the storm it causes"}
}

// liveShort is the end-to-end test's live run: 16 hosts read every 5 s for
// 15 minutes, played at 90x (10 s wall): a link flap, a PFC storm and a
// disabled notification point.
func liveShort() LiveScenario {
	c := LiveConfig(16, 5*time.Second, 15*time.Minute, liveStart)
	c.Seed = 16
	c.Fabric = "live-short"
	at := func(d time.Duration) time.Time { return liveStart.Add(d) }
	c.Faults = []Fault{
		LinkFlap{Port: PortRef{"gpu-005", "mlx5_1", 1}, At: at(time.Minute + 2300*time.Millisecond), Down: 4 * time.Second},
		PFCStorm{Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(3*time.Minute + 1300*time.Millisecond),
			Duration: 3 * time.Minute, Spread: 300 * time.Millisecond, MaxAffected: 3},
		CNPECNImbalance{Kind: NPDisabled, Port: PortRef{"gpu-011", "mlx5_0", 1},
			From: at(6*time.Minute + 3100*time.Millisecond), Duration: 5 * time.Minute, MarkedPerSecond: 3000},
	}
	return LiveScenario{Name: "live-short", Speed: 90, Config: c,
		Description: "16 hosts, 15 min at 5 s played at 90x: a link flap, a PFC storm, a disabled notification point"}
}

// String is the scenario's one-line description.
func (s LiveScenario) String() string {
	return fmt.Sprintf("%s: %s", s.Name, s.Description)
}
