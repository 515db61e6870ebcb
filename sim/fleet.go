package sim

import (
	"math/rand/v2"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// Trace line kinds (trace format v1).
const (
	KindSample           = trace.KindSample
	KindCollectorRestart = trace.KindCollectorRestart
)

// Counter is one key of a sample.
type Counter = trace.Counter

// Sample is one trace line as the trace writer takes it (trace.Record): a
// port reading (Kind "sample") or a node's collector restart (Kind
// "collector_restart", with Time and Node only). Counters, HWCounters and
// Ethtool are in the order the files are listed; a key that could not be
// read is absent.
type Sample trace.Record

// Record is the sample as the trace writer takes it.
func (s *Sample) Record() *trace.Record { return (*trace.Record)(s) }

// AppendJSON appends the line in trace format v1 (trace.Record.AppendJSON).
func (s *Sample) AppendJSON(b []byte) []byte { return s.Record().AppendJSON(b) }

// Map returns one source's counters as a map.
func (s *Sample) Map(src schemas.Source) map[string]uint64 {
	var cs []Counter
	switch src {
	case schemas.SourceCounters:
		cs = s.Counters
	case schemas.SourceHWCounters:
		cs = s.HWCounters
	case schemas.SourceEthtool:
		cs = s.Ethtool
	}
	if cs == nil {
		return nil
	}
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m
}

// Summary counts what a run produced.
type Summary struct {
	Nodes, Ports, Ticks int
	Samples             int // sample lines, duplicates included
	Duplicates          int
	Glitches            int
	Missing             int // port readings dropped by gaps
	CollectorRestarts   int
	Resets              int
	Labels              int
	Start, End          time.Time
	Noise               []NoiseEvent
}

type simPort struct {
	state   *PortState
	model   portModel
	rng     *rand.Rand
	effects []Effect
	offset  time.Duration // where the port sits in its node's scrape
	last    time.Time
	first   bool
	conf    portConfig // misconfig.go
	// pendingReset: the bond this member belongs to was reloaded this round.
	pendingReset bool
}

type simNode struct {
	phase          time.Duration // where the node's scrape sits in the interval
	restartPending bool
}

// Fleet is a simulated fleet that advances one reading round per Step: the
// source of Generate, and of a live simulated collector.
type Fleet struct {
	cfg     Config
	layout  *Layout
	ports   []simPort
	nodes   []simNode
	effects []Effect
	noise   *noisePlan
	tick    int
	sum     Summary
}

// NewFleet builds the fleet a config describes.
func NewFleet(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.RatesGbps = append([]int(nil), cfg.RatesGbps...)
	cfg.Faults = append([]Fault(nil), cfg.Faults...)
	l := newLayout(&cfg)
	f := &Fleet{cfg: cfg, layout: l}
	faulty := map[PortRef]bool{}
	byPort := map[PortRef][]Effect{}
	for _, fault := range cfg.Faults {
		e, err := fault.Start(l)
		if err != nil {
			return nil, err
		}
		f.effects = append(f.effects, e)
		for _, r := range e.Ports() {
			faulty[r] = true
			byPort[r] = append(byPort[r], e)
		}
	}
	// Congestion notifications balance across a healthy fabric: every CNP a
	// notification point sends is handled by some reaction point. Unless a
	// fault already moves CNPs fabric-wide, a loss-free pool hands each round's
	// CNPs to the reaction points. It is not a fault: no label, and the ports
	// stay open to noise.
	if !hasFabricCNPEffect(f.effects) {
		if bal := newCNPBalance(l); bal != nil {
			for _, r := range bal.refs {
				byPort[r] = append(byPort[r], bal)
			}
		}
	}
	var events []NoiseEvent
	f.noise, events = newNoisePlan(&cfg, l, faulty)

	setup := rand.New(rand.NewPCG(cfg.Seed, 0x5e7))
	interval := cfg.Interval
	for range l.Nodes {
		// Scrapes start within the first fifth of the interval.
		phase := time.Duration(setup.Int64N(int64(interval/5)/1e6+1)) * time.Millisecond
		f.nodes = append(f.nodes, simNode{phase: phase})
	}
	f.ports = make([]simPort, len(l.Ports))
	for ni, idx := range l.nodePorts {
		uptime := time.Duration(1+setup.Int64N(45*24)) * time.Hour
		linkDowns := uint64(setup.IntN(3))
		for j, pi := range idx {
			info := l.Ports[pi]
			p := &f.ports[pi]
			p.state = newPortState(info)
			p.rng = rand.New(rand.NewPCG(cfg.Seed, uint64(pi)+1<<32))
			idle := p.rng.Float64() < cfg.Noise.IdleFraction
			p.model = newPortModel(p.rng, cfg.Utilisation, idle)
			p.effects = byPort[info.PortRef]
			p.offset = time.Duration(2+3*j) * time.Millisecond
			p.first = true
			// The port's life before the trace: months of traffic, the
			// odd link-down at boot.
			start := l.Start.Add(f.nodes[ni].phase + p.offset - interval)
			hist := Tick{Prev: start.Add(-uptime), Now: start, Port: p.state, Rand: p.rng,
				UpFraction: 1, UtilScale: 1, BERScale: 1, CNPScale: 1}
			p.model.advance(&hist, true)
			p.state.Add(schemas.SourceCounters, "link_downed", linkDowns)
			p.state.Add(schemas.SourceEthtool, "link_down_events_phy", linkDowns)
			// port_xmit_wait is 32 bits wide and saturates (PortCounters):
			// months of congestion would pin it, and fabric managers clear
			// it (OpenSM's PerfMgr clears the PortCounters it sweeps), so
			// a port starts the trace somewhere below the top.
			if cs := p.state.set; cs.xmitWait >= 0 && p.state.values[cs.xmitWait] >= 1<<31 {
				p.state.values[cs.xmitWait] = p.rng.Uint64N(1 << 31)
			}
			if f.noise.nearWrap[pi] {
				// The 32-bit q-counters wrap (the congestion counters np_*
				// and rp_* are 64-bit and never do): put the ones a healthy
				// port moves at the edge.
				cs := p.state.set
				for _, i := range []int{cs.outOfBuffer, cs.outOfSequence, cs.duplicateRequest, cs.packetSeqErr} {
					if i >= 0 {
						p.state.values[i] = schemas.Wrap32.Max() - uint64(p.rng.IntN(2))
					}
				}
			}
			p.last = start
		}
	}
	f.sum = Summary{Nodes: len(l.Nodes), Ports: len(l.Ports), Ticks: cfg.Ticks(), Start: l.Start, End: l.End, Noise: events}
	return f, nil
}

// Layout is the simulated fabric.
func (f *Fleet) Layout() *Layout { return f.layout }

// Done reports whether every reading round was stepped.
func (f *Fleet) Done() bool { return f.tick >= f.cfg.Ticks() }

// Step reads every port once more and returns the round's tick time and its
// trace lines, in the order a merged stream of collectors would deliver
// them. ok is false when the duration is over.
func (f *Fleet) Step() (tick time.Time, lines []Sample, ok bool) {
	if f.Done() {
		return time.Time{}, nil, false
	}
	k := f.tick
	f.tick++
	tick = f.layout.Start.Add(time.Duration(k) * f.cfg.Interval)
	jitterMax := int64(f.cfg.Noise.JitterFraction * float64(f.cfg.Interval/time.Millisecond))
	np := f.noise
	for ni := range f.nodes {
		n := &f.nodes[ni]
		if np.restarts[k*np.nodes+ni] {
			n.restartPending = true
		}
		silent := np.nodeGaps[k*np.nodes+ni]
		for _, pi := range f.layout.nodePorts[ni] {
			p := &f.ports[pi]
			var jitter time.Duration
			if jitterMax > 0 {
				jitter = time.Duration(p.rng.Int64N(jitterMax+1)) * time.Millisecond
			}
			now := tick.Add(n.phase + p.offset + jitter)
			reset := np.resets[k*np.ports+pi]
			if reset && p.state.Info.role == roleBond {
				// A driver reload of a LAG clears the members' statistics too.
				for _, m := range f.layout.nodePorts[ni] {
					if f.layout.Ports[m].MemberOf == p.state.Info.Device {
						f.ports[m].pendingReset = true
					}
				}
			}
			reset = reset || p.pendingReset
			p.pendingReset = false
			f.advance(p, now, reset)
			if silent || np.portGaps[k*np.ports+pi] {
				f.sum.Missing++
				continue
			}
			if n.restartPending {
				n.restartPending = false
				f.sum.CollectorRestarts++
				lines = append(lines, Sample{Kind: KindCollectorRestart, Node: p.state.Info.Node,
					Time: now.Add(-time.Duration(1+p.rng.IntN(50)) * time.Millisecond)})
			}
			s := p.sample(now)
			if drop, ok := np.glitches[k*np.ports+pi]; ok {
				s.drop(drop)
				f.sum.Glitches++
			}
			lines = append(lines, s)
			f.sum.Samples++
			if np.duplicates[k*np.ports+pi] {
				lines = append(lines, s)
				f.sum.Samples++
				f.sum.Duplicates++
			}
		}
	}
	return tick, lines, true
}

func (f *Fleet) advance(p *simPort, now time.Time, reset bool) {
	t := Tick{Prev: p.last, Now: now, First: p.first, Port: p.state, Rand: p.rng,
		UpFraction: 1, UtilScale: 1, BERScale: 1, CNPScale: 1, State: "ACTIVE"}
	f.baseConfig(p, &t)
	if reset {
		// A driver reload: the counters restart from zero and count the
		// rest of the window.
		p.state.Clear()
		f.sum.Resets++
	}
	for _, e := range p.effects {
		e.Apply(&t)
	}
	p.model.advance(&t, false)
	for _, e := range p.effects {
		e.Observe(&t)
	}
	p.conf.observe(&t)
	p.state.linkState = t.State
	p.last, p.first = now, false
}

func (p *simPort) sample(now time.Time) Sample {
	info := p.state.Info
	s := Sample{
		Kind: KindSample, Time: now, Node: info.Node, Device: info.Device, Port: info.Port,
		Netdev: info.Netdev, LinkLayer: info.LinkLayer, State: p.state.linkState, Rate: info.Rate(),
		Config: p.conf.reported(),
	}
	// One allocation per sample, cut into the three sources (the set lists
	// counters, then hw_counters, then ethtool).
	all := make([]Counter, len(p.state.values))
	var n [4]int
	for i, d := range p.state.set.defs {
		all[i] = Counter{Name: d.name, Value: p.state.values[i]}
		n[d.src]++
	}
	s.Counters = all[:n[schemas.SourceCounters]:n[schemas.SourceCounters]]
	rest := all[n[schemas.SourceCounters]:]
	s.HWCounters = rest[:n[schemas.SourceHWCounters]:n[schemas.SourceHWCounters]]
	if e := rest[n[schemas.SourceHWCounters]:]; len(e) > 0 {
		s.Ethtool = e
	}
	if len(s.Counters) == 0 {
		// A bond member's sample: ethtool only, no sysfs files.
		s.Counters, s.HWCounters = nil, nil
	}
	return s
}

// drop removes the i-th key over all sources (a read glitch).
func (s *Sample) drop(i int) {
	for _, cs := range []*[]Counter{&s.Counters, &s.HWCounters, &s.Ethtool} {
		if i < len(*cs) {
			*cs = append((*cs)[:i:i], (*cs)[i+1:]...)
			return
		}
		i -= len(*cs)
	}
}

// Labels returns the ground truth so far, ordered by start.
func (f *Fleet) Labels() []Label {
	var ls []Label
	for _, e := range f.effects {
		ls = append(ls, e.Labels()...)
	}
	sortLabels(ls)
	return ls
}

// Summary counts what the fleet produced so far.
func (f *Fleet) Summary() Summary {
	s := f.sum
	s.Labels = len(f.Labels())
	return s
}
