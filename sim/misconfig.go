package sim

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Port configuration in the trace (the sample's optional `config`) and the
// misconfigurations config_mismatch finds.
//
// A fleet reports configuration only when its Config.Faults hold a
// ConfigReport or a Misconfig, so older scenarios keep their bytes. Then
// every RoCE port is set up alike (ConfigReport's MTU, PFC and both ECN
// points on its priority, trust dscp) and InfiniBand ports with IPoIB
// report their MTU. How a host reports is noise, chosen per port from the
// seed: most on every reading, many only when the config changes, a few
// only the MTU and trust mode (no DCB or ECN access), a few nothing. Some
// ports have PFC on an extra priority and trust pcp: not a mismatch.

func init() { registerScenario(misconfigScenario) }

// ConfigReport makes every host report its ports' configuration. It is
// not a fault: it touches no port and labels nothing.
type ConfigReport struct {
	// MTU of the RoCE ports; 0 means 4200. Priority is the lossless one;
	// 0 means 3.
	MTU      int
	Priority int
}

// Start implements Fault.
func (c ConfigReport) Start(l *Layout) (Effect, error) {
	if c.MTU < 0 || c.Priority < 0 || c.Priority > schemas.MaxPriority {
		return nil, fmt.Errorf("config_report: MTU %d or priority %d out of range", c.MTU, c.Priority)
	}
	return configReportEffect{}, nil
}

type configReportEffect struct{}

func (configReportEffect) Ports() []PortRef { return nil }
func (configReportEffect) Apply(*Tick)      {}
func (configReportEffect) Observe(*Tick)    {}
func (configReportEffect) Labels() []Label  { return nil }

// MisconfigKind is the setting a Misconfig changes.
type MisconfigKind int

const (
	// MisconfigMTU sets the port's MTU to Misconfig.MTU (default 1500).
	MisconfigMTU MisconfigKind = iota
	// MisconfigPFCOff turns PFC off on the lossless priority.
	MisconfigPFCOff
	// MisconfigNPOff turns the ECN notification point off on the lossless
	// priority: the port answers no ECN mark with a CNP, which
	// cnp_ecn_imbalance sees (its label names this one as cause).
	MisconfigNPOff
	// MisconfigRPOff turns the ECN reaction point off: the port ignores
	// the CNPs it receives (cnp_ecn_imbalance, caused by this one).
	MisconfigRPOff
)

func (k MisconfigKind) String() string {
	switch k {
	case MisconfigMTU:
		return "mtu"
	case MisconfigPFCOff:
		return "pfc_off"
	case MisconfigNPOff:
		return "ecn_np_off"
	case MisconfigRPOff:
		return "ecn_rp_off"
	}
	return fmt.Sprintf("misconfig(%d)", int(k))
}

// Misconfig is a RoCE port whose setting disagrees with the fabric's from
// From for Duration (0: to the end of the trace).
type Misconfig struct {
	Kind     MisconfigKind
	Port     PortRef
	From     time.Time
	Duration time.Duration
	// MTU is MisconfigMTU's value; 0 means 1500.
	MTU int
}

// Start implements Fault.
func (f Misconfig) Start(l *Layout) (Effect, error) {
	if f.Duration < 0 || f.MTU < 0 {
		return nil, fmt.Errorf("misconfig: negative duration or MTU")
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "misconfig from", f.From); err != nil {
		return nil, err
	}
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("misconfig: no port %s", f.Port)
	}
	if info.LinkLayer != LinkLayerEthernet || !info.RDMA() {
		return nil, fmt.Errorf("misconfig: %s is not a RoCE port", f.Port)
	}
	if f.MTU == 0 {
		f.MTU = 1500
	}
	until := l.End.Add(time.Hour)
	if f.Duration > 0 {
		until = f.From.Add(f.Duration)
	}
	e := &misconfig{spec: f, until: until}
	// What the setting does to the counters is the CNP model's.
	switch f.Kind {
	case MisconfigNPOff, MisconfigRPOff:
		kind := NPDisabled
		if f.Kind == MisconfigRPOff {
			kind = RPIgnoring
		}
		cnp, err := CNPECNImbalance{Kind: kind, Port: f.Port, From: f.From, Duration: f.Duration}.Start(l)
		if err != nil {
			return nil, err
		}
		e.cnp = cnp
	case MisconfigMTU, MisconfigPFCOff:
	default:
		return nil, fmt.Errorf("misconfig: unknown kind %d", int(f.Kind))
	}
	return e, nil
}

type misconfig struct {
	spec       Misconfig
	until      time.Time
	cnp        Effect // NP/RP off: the counters' side
	start, end *schemas.Millis
}

func (e *misconfig) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *misconfig) Apply(t *Tick) {
	if e.cnp != nil {
		e.cnp.Apply(t)
	}
	if t.Config == nil || t.Now.Before(e.spec.From) || !t.Now.Before(e.until) {
		return
	}
	c := *t.Config // the reading's own copy
	prio := configPriority(&c)
	switch e.spec.Kind {
	case MisconfigMTU:
		c.MTU = &e.spec.MTU
	case MisconfigPFCOff:
		c.PFCEnabled = withoutPriority(c.PFCEnabled, prio)
	case MisconfigNPOff:
		c.ECNNPEnabled = withoutPriority(c.ECNNPEnabled, prio)
	case MisconfigRPOff:
		c.ECNRPEnabled = withoutPriority(c.ECNRPEnabled, prio)
	}
	t.Config = &c
}

// Observe times the label by the readings: it starts with the first one
// that shows the setting changed and ends with the first that shows it
// put back.
func (e *misconfig) Observe(t *Tick) {
	if e.cnp != nil {
		e.cnp.Observe(t)
	}
	on := !t.Now.Before(e.spec.From) && t.Now.Before(e.until)
	switch {
	case on && e.start == nil:
		e.start = millisPtr(t.Now)
	case !on && e.start != nil && e.end == nil:
		e.end = millisPtr(t.Now)
	}
}

func (e *misconfig) Labels() []Label {
	if e.start == nil {
		return nil
	}
	subject := portSubject(e.spec.Port)
	ls := []Label{{Type: "config_mismatch", Start: *e.start, End: e.end, Subject: subject}}
	if e.cnp != nil {
		for _, l := range e.cnp.Labels() {
			l.Cause = &schemas.LabelCause{Type: "config_mismatch", Subject: subject}
			ls = append(ls, l)
		}
	}
	return ls
}

// configPriority is the lossless priority of a healthy config.
func configPriority(c *schemas.PortConfig) int {
	if c.ECNNPEnabled != nil && len(*c.ECNNPEnabled) > 0 {
		return (*c.ECNNPEnabled)[0]
	}
	return 3
}

func withoutPriority(list *[]int, p int) *[]int {
	if list == nil {
		return nil
	}
	out := []int{}
	for _, x := range *list {
		if x != p {
			out = append(out, x)
		}
	}
	return &out
}

// How a port reports its config (portConfig.report).
const (
	reportEvery   = iota // every reading
	reportChange         // its first reading and when the config changes
	reportPartial        // MTU and trust only, every reading
	reportNone           // nothing
)

// portConfig is a port's configuration reporting: fleet.go keeps one per
// port, baseConfig sets the reading's healthy config before the faults
// change it, and the reading carries what report returns.
type portConfig struct {
	checked bool
	on      bool
	report  int
	base    *schemas.PortConfig
	shown   *schemas.PortConfig // this reading's, after the faults
	last    *schemas.PortConfig // the last one reported
}

// baseConfig puts the port's healthy config on the tick when the fleet
// reports configs.
func (f *Fleet) baseConfig(p *simPort, t *Tick) {
	pc := &p.conf
	if !pc.checked {
		pc.checked = true
		var rep *ConfigReport
		for _, fault := range f.cfg.Faults {
			switch x := fault.(type) {
			case ConfigReport:
				rep = &x
			case Misconfig:
				if rep == nil {
					rep = &ConfigReport{}
				}
			}
		}
		if rep == nil {
			return
		}
		pc.on = true
		pc.report, pc.base = healthyConfig(f.cfg.Seed, p.state.Info, *rep, f.misconfigured(p.state.Info.PortRef))
	}
	if pc.on {
		t.Config = pc.base
	}
}

func (f *Fleet) misconfigured(r PortRef) bool {
	for _, fault := range f.cfg.Faults {
		if m, ok := fault.(Misconfig); ok && m.Port == r {
			return true
		}
	}
	return false
}

// healthyConfig is a port's config and how its host reports it, from the
// seed and the port alone.
func healthyConfig(seed uint64, info PortInfo, rep ConfigReport, faulty bool) (int, *schemas.PortConfig) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, info.PortRef)
	x := h.Sum64()
	draw := func(n uint64) uint64 { v := x % n; x /= n; return v }
	report := reportEvery
	switch v := draw(100); {
	case v < 35:
		report = reportChange
	case v < 43:
		report = reportPartial
	case v < 48:
		report = reportNone
	}
	if faulty && report >= reportPartial {
		report = reportEvery // a fault on a port that reports nothing would be no test
	}
	if !info.RDMA() {
		return reportNone, nil // a bond member: its settings are the bond's
	}
	if info.LinkLayer != LinkLayerEthernet {
		if info.Netdev == "" {
			return reportNone, nil
		}
		mtu := []int{2044, 4092}[draw(2)]
		return report, &schemas.PortConfig{MTU: &mtu}
	}
	mtu, prio := rep.MTU, rep.Priority
	if mtu == 0 {
		mtu = 4200
	}
	if prio == 0 {
		prio = 3
	}
	c := &schemas.PortConfig{MTU: &mtu, PFCEnabled: &[]int{prio}, ECNNPEnabled: &[]int{prio}, ECNRPEnabled: &[]int{prio}, Trust: "dscp"}
	if draw(10) == 0 {
		c.PFCEnabled = &[]int{0, prio} // an extra lossless class
	}
	if info.NIC == NICGlobalPause {
		// Link-level flow control: no priority has PFC on.
		c.PFCEnabled = &[]int{}
	}
	if draw(8) == 0 {
		c.Trust = "pcp"
	}
	return report, c
}

// observe notes the config the reading shows after the faults.
func (pc *portConfig) observe(t *Tick) { pc.shown = t.Config }

// reported is what the port's reading carries.
func (pc *portConfig) reported() *schemas.PortConfig {
	if !pc.on || pc.shown == nil {
		return nil
	}
	switch pc.report {
	case reportNone:
		return nil
	case reportPartial:
		return &schemas.PortConfig{MTU: pc.shown.MTU, Trust: pc.shown.Trust}
	case reportChange:
		if pc.last != nil && pc.last.Equal(pc.shown) {
			return nil
		}
	}
	pc.last = pc.shown
	return pc.shown
}

// misconfigScenario: a RoCE fleet reporting its configuration, with config
// noise everywhere; an MTU mismatch, PFC off on the lossless priority, the
// ECN notification point and then a reaction point off (each with the
// cnp_ecn_imbalance it causes); the usual noise. 5 s interval.
func misconfigScenario() Scenario {
	c := DefaultConfig()
	c.Seed = 4201
	c.Fabric = "misconfig"
	c.Hosts = 12
	c.IBHosts = 2
	c.HostsPerLeaf = 4
	c.Start = scenarioStart
	c.Duration = 30 * time.Minute
	c.Noise = Noise{
		JitterFraction: 0.3, IdleFraction: 0.1,
		Resets: 2, CollectorRestarts: 2, PortGaps: 2, NodeGaps: 1, GapIntervals: 4,
		Duplicates: 3, Glitches: 3,
	}
	at := func(min int, ms int) time.Time {
		return scenarioStart.Add(time.Duration(min)*time.Minute + time.Duration(ms)*time.Millisecond)
	}
	c.Faults = []Fault{
		ConfigReport{MTU: 4200, Priority: 3},
		Misconfig{Kind: MisconfigMTU, Port: PortRef{"gpu-002", "mlx5_0", 1}, From: at(3, 1200), Duration: 6 * time.Minute, MTU: 1500},
		Misconfig{Kind: MisconfigPFCOff, Port: PortRef{"gpu-005", "mlx5_1", 1}, From: at(8, 300), Duration: 7 * time.Minute},
		Misconfig{Kind: MisconfigNPOff, Port: PortRef{"gpu-007", "mlx5_0", 1}, From: at(12, 2700), Duration: 8 * time.Minute},
		Misconfig{Kind: MisconfigRPOff, Port: PortRef{"gpu-009", "mlx5_1", 1}, From: at(21, 900)},
	}
	return Scenario{Name: "misconfig", Gzip: true, Config: c}
}
