// Package altgen is an independent trace generator for rdmawatch: a second
// opinion on what a fleet's counters look like, written without looking at
// the simulator's model (sim) so the detectors can be judged on data
// they were not tuned on. It writes trace format v1, topology format v1 and
// labels format v1 (docs/formats.md).
//
// The model, in short:
//   - time runs in 1 s steps; every counter is a float accumulator, and a
//     node's reading (taken at its own phase, with heavy-tailed jitter) is the
//     accumulators interpolated to the reading's millisecond;
//   - traffic is diurnal times per-leaf ON/OFF jobs with lognormal intensity
//     and multiplicative per-step noise (bursty, not smooth);
//   - congestion is a per-leaf process (shared by every port under the leaf):
//     ECN marks, CNPs, xmit_wait and short incast pauses all follow it, and
//     the CNPs the notification points send are delivered to the senders of
//     the fabric in proportion to what they transmit;
//   - pre-FEC errors come in codeword clumps (1-4 bits), with a slow AR(1)
//     temperature wander of the BER; InfiniBand symbol errors are sparse
//     Poisson events with occasional retrain bursts;
//   - noise: read glitches (a file read as 0), missing keys, missing
//     hw_counters/ethtool sets, duplicates redelivered far from the original,
//     lines of different nodes out of order by up to one interval, port and
//     node gaps, collector restarts, driver reloads (every counter of the
//     device to ~0, link_downed to 0 or 1), perfquery -R (PortCounters only),
//     counters saturated from the first line, 32-bit hw counters that wrap.
//
// The physical constants (link rates, BERs and drift ramps, loss and
// reordering, utilisation, jitter, NIC profile) are the historical ones
// unless Config.RandomPhysics draws them per fabric (physics.go).
package altgen

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Fault kinds.
const (
	PFCStorm       = "pfc_storm"        // a stuck receiver pauses its leaf
	PFCStormSilent = "pfc_storm_silent" // the same, its host hung: no samples
	BERDrift       = "ber_drift"        // Ethernet pre-FEC BER drifts to 1e-6
	BERDriftIB     = "ber_drift_ib"     // InfiniBand symbol errors rise to 1e-12
	NPDisabled     = "np_disabled"      // a port stops answering ECN marks with CNPs
	RPIgnoring     = "rp_ignoring"      // a port ignores the CNPs it receives
	CNPLoss        = "cnp_loss"         // the fabric drops a share of the CNPs
	LinkDown       = "link_down"        // a port goes DOWN for a while
)

// Fault is one injected fault. Zero fields are chosen from the seed.
type Fault struct {
	Kind string
	At   time.Duration // from the trace start
	Dur  time.Duration // 0: until the end
	// Ramp is the time from onset to the critical level (BER drifts).
	Ramp time.Duration
	// Shape is the exponent of the log-BER rise (1 linear, >1 slow start).
	Shape float64
	// Loss is the lost share of CNPs (CNPLoss).
	Loss float64
	Port int // index into the fabric's ports of a fitting kind; -1 random
	// Drawn is the ramp of a BER drift under drawn physics (physics.go),
	// set by the generator: Ramp is then the time to critical it implies.
	Drawn RampShape
}

// Config describes one trace.
type Config struct {
	Seed         uint64
	Fabric       string
	Start        time.Time
	Duration     time.Duration
	Interval     time.Duration
	Leaves       int
	HostsPerLeaf int
	PortsPerHost int
	// IBLeaves is how many leaves (the last ones) are InfiniBand; with
	// IBLeaves == Leaves the fabric is IB-only.
	IBLeaves int
	// Noise turns on the realistic mess (see the package comment).
	Noise bool
	// SaturatedFromStart pins symbol_error (IB) or port_xmit_discards
	// (RoCE) of one port from the first line: a labelled counter_saturated.
	SaturatedFromStart bool
	// StableHighBER gives a few links a high but stable BER (never a drift).
	StableHighBER bool
	// NIC is the counter set the hosts' driver lists (nic.go): NICFull
	// (""), NICUpstream, NICGlobalPause or NICBonded.
	NIC string
	// RandomPhysics draws the fabric's physical constants from the seed
	// and the fabric's name (DrawPhysics, physics.go) instead of the
	// historical ones; Physics, when set, gives them outright. Neither:
	// fixed physics, the traces as they always were.
	RandomPhysics bool
	Physics       *Physics
	Faults        []Fault
}

// physics resolves the trace's physics; under drawn physics an unset NIC
// profile is the drawn one (an InfiniBand-only fabric has no RoCE port to
// profile: full).
func (c Config) physics() (Physics, string) {
	ph := FixedPhysics()
	switch {
	case c.Physics != nil:
		ph = *c.Physics
	case c.RandomPhysics:
		ph = DrawPhysics(c.Seed, c.Fabric)
	}
	nic := c.NIC
	if nic == "" && !ph.Fixed && ph.NIC != "" && c.IBLeaves < c.Leaves {
		nic = ph.NIC
	}
	return ph, nic
}

type counterDef struct {
	src  int // 0 counters, 1 hw_counters, 2 ethtool
	name string
	max  float64 // saturating max, 0: none
	wrap bool    // 32-bit wrap
}

type port struct {
	node, dev, netdev string
	num               int
	ib                bool
	leaf              int
	host              int
	rateGbps          float64
	rateText          string
	defs              []counterDef
	idx               map[string]int
	acc, prev         []float64
	missing           []bool // set a whole source missing: per counter
	pktSize           float64
	baseBER           float64 // Ethernet pre-FEC BER or IB symbol BER
	wander            float64 // AR(1) ln-BER offset
	npRatio           float64 // CNPs per mark
	markProb          float64
	weight            float64 // share of the leaf's traffic
	down              bool
	hwOK, ethOK       bool
	laneBias          int
	satFromStart      string
	stuck             float64 // pfc origin pause fraction (0: none)
	victim            float64 // pfc victim rx pause fraction target
	npOff, rpIgnore   float64
	drift             *Fault
	driftFrom         float64 // ln BER at the onset
	driftBase         float64 // drawn physics: the BER a drift starts from
	lanes             int     // drawn physics: lanes that count errors (0: 4)
	busy              float64 // drawn physics: utilisation floor (a lossy link's job)
	app               appState
	satSeen           map[string]bool // saturating counters that reached their max
	devIdx            int             // the port's index on its host
	bond              [2]string       // member netdevs of a RoCE LAG (nic.go); "" otherwise
	m1                *member1        // the LAG's second member's PHY
}

type node struct {
	name     string
	ports    []*port
	phase    float64 // seconds
	next     float64 // next read time, seconds from start
	silentTo float64 // no readings until then
	watchdog bool
}

type line struct {
	key  float64 // output order
	node int
	seq  int
	text []byte
}

// Label is labels format v1.
type Label struct {
	Type       string          `json:"type"`
	Start      string          `json:"start"`
	End        *string         `json:"end"`
	Subject    map[string]any  `json:"subject"`
	Scope      string          `json:"scope,omitempty"`
	Affected   []LabelAffected `json:"affected,omitempty"`
	CriticalAt string          `json:"critical_at,omitempty"`
	Cause      *LabelCause     `json:"cause,omitempty"`
}

// LabelAffected is a node a storm reached.
type LabelAffected struct {
	Node      string `json:"node"`
	FirstSeen string `json:"first_seen"`
}

type gen struct {
	cfg     Config
	r       *rand.Rand
	nodes   []*node
	ports   []*port
	leafC   []float64 // congestion per leaf, 0..1
	leafJ   []float64 // job intensity per leaf
	leafOn  []bool
	prio    int
	lines   []line
	labels  []Label
	events  []event // scheduled noise and fault edges
	cnpLoss float64
	// storm bookkeeping for labels
	storms    []*stormState
	rApp      *rand.Rand // transport.go's random source
	rPhys     *rand.Rand // physics.go's per-port source (drawn physics)
	ph        Physics
	confState *confState // misconfig.go: nil when no line carries a config
}

type stormState struct {
	origin   *port
	start    float64
	end      float64
	victims  map[*port]float64 // delay after onset
	first    map[string]float64
	label    *Label
	silentTo float64
	cause    *LabelCause
}

type event struct {
	at   float64
	what string
	p    *port
	n    *node
	v    float64
}

func ts(start time.Time, sec float64) string {
	t := start.Add(time.Duration(math.Round(sec*1000)) * time.Millisecond)
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// Generate writes trace.jsonl[.gz], topology.json and labels.jsonl to dir.
func Generate(cfg Config, dir string, gz bool) error {
	var ph Physics
	ph, cfg.NIC = cfg.physics()
	cfg.Physics, cfg.RandomPhysics = &ph, false
	if !validNIC(cfg.NIC) {
		return fmt.Errorf("NIC profile %q is not one of %s", cfg.NIC, strings.Join(NICs, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := newGen(cfg)
	g.run()
	tracePath := filepath.Join(dir, "trace.jsonl")
	if gz {
		tracePath += ".gz"
	}
	f, err := os.Create(tracePath)
	if err != nil {
		return err
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if gz {
		zw, _ = gzip.NewWriterLevel(f, gzip.BestCompression)
		w = zw
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, l := range g.lines {
		bw.Write(l.text)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "topology.json"), g.topology(), 0o644); err != nil {
		return err
	}
	var lb strings.Builder
	for _, l := range g.labels {
		b, _ := json.Marshal(l)
		lb.Write(b)
		lb.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(dir, "labels.jsonl"), []byte(lb.String()), 0o644)
}

func newGen(cfg Config) *gen {
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 5, 2, 6, 0, 0, 0, time.UTC)
	}
	if cfg.Fabric == "" {
		cfg.Fabric = "alt"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.PortsPerHost <= 0 {
		cfg.PortsPerHost = 1
	}
	g := &gen{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	g.ph, g.cfg.NIC = cfg.physics()
	if g.nicProfile() == NICGlobalPause {
		g.conf() // every host reports its config: pfc_enabled [] (nic.go)
	}
	g.prio = []int{3, 5}[g.r.IntN(2)]
	iv := cfg.Interval.Seconds()
	for l := 0; l < cfg.Leaves; l++ {
		ib := l >= cfg.Leaves-cfg.IBLeaves
		for h := 0; h < cfg.HostsPerLeaf; h++ {
			n := &node{name: fmt.Sprintf("r%02dn%02d", l+1, h+1), phase: g.r.Float64() * iv, watchdog: g.r.IntN(2) == 0}
			n.next = n.phase
			for p := 0; p < cfg.PortsPerHost; p++ {
				pt := g.newPort(n.name, p, ib, l, h)
				n.ports = append(n.ports, pt)
				g.ports = append(g.ports, pt)
			}
			g.nodes = append(g.nodes, n)
		}
	}
	g.leafC = make([]float64, cfg.Leaves)
	g.leafJ = make([]float64, cfg.Leaves)
	g.leafOn = make([]bool, cfg.Leaves)
	for i := range g.leafOn {
		g.leafOn[i] = g.r.Float64() < 0.7
		g.leafJ[i] = math.Exp(g.r.NormFloat64() * 0.3)
	}
	g.plan()
	return g
}

var ibRates = []struct {
	g float64
	t string
}{{100, "100 Gb/sec (4X EDR)"}, {200, "200 Gb/sec (4X HDR)"}, {400, "400 Gb/sec (4X NDR)"}}
var ethRates = []struct {
	g float64
	t string
}{{100, "100 Gb/sec (2X HDR)"}, {200, "200 Gb/sec (4X HDR)"}, {400, "400 Gb/sec (4X NDR)"}}

func (g *gen) newPort(nodeName string, p int, ib bool, leaf, host int) *port {
	pt := &port{node: nodeName, dev: fmt.Sprintf("mlx5_%d", p), num: 1, ib: ib, leaf: leaf, host: host, idx: map[string]int{}, devIdx: p}
	if ib {
		r := ibRates[g.r.IntN(len(ibRates))]
		pt.rateGbps, pt.rateText = r.g, r.t
		if g.drawn() {
			// Drawn from g.r's draw all the same: one seed, one layout.
			lr := g.ph.IBRates[g.physicsSource().IntN(len(g.ph.IBRates))]
			pt.rateGbps, pt.rateText, pt.lanes = lr.Gbps, lr.Text, lr.Lanes
		}
		pt.netdev = fmt.Sprintf("ib%d", p)
		if g.r.IntN(3) == 0 {
			pt.netdev = "" // no IPoIB on that port
		}
	} else {
		r := ethRates[g.r.IntN(len(ethRates))]
		pt.rateGbps, pt.rateText = r.g, r.t
		if g.drawn() {
			lr := g.ph.EthRates[g.physicsSource().IntN(len(g.ph.EthRates))]
			pt.rateGbps, pt.rateText, pt.lanes = lr.Gbps, lr.Text, lr.Lanes
		}
		pt.netdev = fmt.Sprintf("enp%ds0f%dnp%d", 65+32*p, p, p)
	}
	pt.hwOK, pt.ethOK = true, !ib
	if g.cfg.Noise && !ib && g.r.Float64() < 0.08 {
		pt.ethOK = false // ethtool -S not collected on this host
	}
	if g.cfg.Noise && g.r.Float64() < 0.05 {
		pt.hwOK = false // old kernel: no hw_counters
	}
	add := func(src int, name string, max float64, wrap bool) {
		pt.idx[name] = len(pt.defs)
		pt.defs = append(pt.defs, counterDef{src: src, name: name, max: max, wrap: wrap})
	}
	for _, c := range []struct {
		n string
		m float64
	}{{"symbol_error", 65535}, {"link_downed", 255}, {"link_error_recovery", 255}, {"port_rcv_errors", 65535},
		{"port_rcv_remote_physical_errors", 65535}, {"port_rcv_switch_relay_errors", 65535}, {"port_xmit_discards", 65535},
		{"port_xmit_constraint_errors", 255}, {"port_rcv_constraint_errors", 255}, {"local_link_integrity_errors", 15},
		{"excessive_buffer_overrun_errors", 15}, {"VL15_dropped", 65535}} {
		add(0, c.n, c.m, false)
	}
	for _, n := range []string{"port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets", "port_xmit_wait",
		"unicast_rcv_packets", "unicast_xmit_packets", "multicast_rcv_packets", "multicast_xmit_packets"} {
		add(0, n, 0, false)
	}
	hw := []string{"out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "duplicate_request",
		"implied_nak_seq_err", "rnr_nak_retry_err", "rx_read_requests", "rx_write_requests"}
	if !ib {
		hw = append(hw, "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "roce_adp_retrans",
			"roce_slow_restart", "roce_slow_restart_cnps")
	}
	for _, n := range hw {
		add(1, n, 0, true)
	}
	if !ib {
		for _, n := range []string{"rx_bits_phy", "rx_corrected_bits_phy", "rx_pcs_symbol_err_phy", "rx_err_lane_0_phy",
			"rx_err_lane_1_phy", "rx_err_lane_2_phy", "rx_err_lane_3_phy", "link_down_events_phy",
			"tx_pause_storm_warning_events", "tx_pause_storm_error_events", "rx_discards_phy", "tx_discards_phy"} {
			add(2, n, 0, false)
		}
		for _, pr := range []int{0, g.prio} {
			for _, d := range []string{"tx", "rx"} {
				add(2, fmt.Sprintf("%s_prio%d_pause", d, pr), 0, false)
				add(2, fmt.Sprintf("%s_prio%d_pause_duration", d, pr), 0, false)
			}
		}
	}
	pt.acc = make([]float64, len(pt.defs))
	pt.prev = make([]float64, len(pt.defs))
	// A host that has been up for days: large cumulative values, some hw
	// counters close to their 32-bit wrap.
	for i, d := range pt.defs {
		switch {
		case d.name == "port_rcv_data" || d.name == "port_xmit_data":
			pt.acc[i] = math.Floor(g.r.Float64() * 4e13)
		case strings.HasSuffix(d.name, "packets"):
			pt.acc[i] = math.Floor(g.r.Float64() * 1e10)
		case d.wrap && g.r.Float64() < 0.15:
			pt.acc[i] = 4294967295 - math.Floor(g.r.Float64()*2e5)
		case d.wrap:
			pt.acc[i] = math.Floor(g.r.Float64() * 1e8)
		case d.name == "rx_bits_phy":
			pt.acc[i] = math.Floor(g.r.Float64() * 1e17)
		case d.name == "link_downed":
			pt.acc[i] = float64(g.r.IntN(3))
		case d.name == "link_down_events_phy":
			pt.acc[i] = float64(g.r.IntN(3))
		case d.max > 0 && d.name == "symbol_error" && ib:
			pt.acc[i] = float64(g.r.IntN(40))
		}
	}
	// The completion error counters and rx_out_of_buffer (transport.go),
	// after the draws above so older seeds keep their values.
	for _, n := range appCounters {
		add(1, n, 0, true)
	}
	if !ib {
		add(2, "rx_out_of_buffer", 0, false)
	}
	for len(pt.acc) < len(pt.defs) {
		pt.acc = append(pt.acc, math.Floor(g.rn().Float64()*1e5))
		pt.prev = append(pt.prev, 0)
	}
	g.initApp(pt)
	pt.pktSize = 1024 + float64(g.r.IntN(4))*1024
	if ib {
		// Symbol BER: most links show a few errors a day, some a few an hour.
		pt.baseBER = math.Exp(math.Log(2e-17) + g.r.NormFloat64()*1.2)
	} else {
		pt.baseBER = math.Exp(math.Log(3e-9) + g.r.NormFloat64()*1.3)
	}
	if g.drawn() {
		pt.baseBER = g.portBER(ib)
	}
	pt.npRatio = 0.03 + g.r.Float64()*0.25
	pt.markProb = 0.004 + g.r.Float64()*0.02
	pt.weight = math.Exp(g.r.NormFloat64() * 0.4)
	pt.laneBias = g.r.IntN(4)
	g.bondPort(pt, p)
	return pt
}

func (g *gen) at(sec float64, what string, p *port, n *node, v float64) {
	g.events = append(g.events, event{at: sec, what: what, p: p, n: n, v: v})
}

// pick returns a port matching ok, the i-th of them when i >= 0, else a
// random one not used by a fault yet.
func (g *gen) pick(i int, ok func(*port) bool, used map[*port]bool) *port {
	var c []*port
	for _, p := range g.ports {
		if ok(p) && !used[p] {
			c = append(c, p)
		}
	}
	if len(c) == 0 {
		return nil
	}
	if i >= 0 {
		return c[i%len(c)]
	}
	return c[g.r.IntN(len(c))]
}

func (g *gen) nodeOf(p *port) *node {
	for _, n := range g.nodes {
		if n.name == p.node {
			return n
		}
	}
	return nil
}

func (g *gen) plan() {
	dur := g.cfg.Duration.Seconds()
	used := map[*port]bool{}
	usedNodes := map[string]bool{}
	faultNode := func(p *port) bool { return usedNodes[p.node] }
	for _, f := range g.cfg.Faults {
		at := f.At.Seconds()
		end := dur + 1e9
		if f.Dur > 0 {
			end = at + f.Dur.Seconds()
		}
		if g.planApp(f, used, usedNodes) || g.planConfig(f, used, usedNodes) {
			continue
		}
		switch f.Kind {
		case PFCStorm, PFCStormSilent:
			p := g.pick(f.Port, func(p *port) bool { return !p.ib && p.ethOK && p.hwOK && !faultNode(p) }, used)
			if p == nil {
				continue
			}
			used[p], usedNodes[p.node] = true, true
			g.planStorm(p, at, end, f.Kind == PFCStormSilent)
		case BERDrift, BERDriftIB:
			ib := f.Kind == BERDriftIB
			p := g.pick(f.Port, func(p *port) bool { return p.ib == ib && (ib || p.ethOK) && !faultNode(p) }, used)
			if p == nil {
				continue
			}
			used[p], usedNodes[p.node] = true, true
			ff := f
			if ff.Ramp <= 0 {
				ff.Ramp = time.Duration(20+g.r.IntN(70)) * time.Minute
			}
			if ff.Shape <= 0 {
				ff.Shape = 1 + g.r.Float64()*0.8
			}
			ff.At = f.At
			g.drawRamp(p, &ff)
			p.drift = &ff
			l := Label{Type: "ber_drift", Start: ts(g.cfg.Start, at), Subject: g.phySubject(p),
				CriticalAt: ts(g.cfg.Start, at+ff.Ramp.Seconds())}
			g.labels = append(g.labels, l)
		case NPDisabled, RPIgnoring:
			p := g.pick(f.Port, func(p *port) bool { return !p.ib && p.hwOK && !faultNode(p) }, used)
			if p == nil {
				continue
			}
			used[p], usedNodes[p.node] = true, true
			v := 1.0
			if f.Kind == RPIgnoring {
				v = 0.6 + 0.4*g.r.Float64()
			}
			g.at(at, f.Kind, p, nil, v)
			g.at(end, f.Kind, p, nil, 0)
			g.at(at-120, "hot", p, nil, 1) // make sure the leaf is congested
			g.at(end+60, "hot", p, nil, 0)
			l := Label{Type: "cnp_ecn_imbalance", Start: ts(g.cfg.Start, at), Subject: g.subject(p)}
			if end < dur {
				e := ts(g.cfg.Start, end)
				l.End = &e
			}
			g.labels = append(g.labels, l)
		case CNPLoss:
			loss := f.Loss
			if loss <= 0 {
				loss = 0.3 + 0.5*g.r.Float64()
			}
			g.at(at, "cnploss", nil, nil, loss)
			g.at(end, "cnploss", nil, nil, 0)
			l := Label{Type: "cnp_ecn_imbalance", Start: ts(g.cfg.Start, at), Subject: map[string]any{}, Scope: "fabric"}
			if end < dur {
				e := ts(g.cfg.Start, end)
				l.End = &e
			}
			g.labels = append(g.labels, l)
		case LinkDown:
			p := g.pick(f.Port, func(p *port) bool { return !faultNode(p) }, used)
			if p == nil {
				continue
			}
			used[p], usedNodes[p.node] = true, true
			g.at(at, "down", p, nil, 1)
			g.at(end, "down", p, nil, 0)
			e := ts(g.cfg.Start, end)
			g.labels = append(g.labels, Label{Type: "link_flap", Start: ts(g.cfg.Start, at), End: &e, Subject: g.subject(p)})
		}
	}
	if g.cfg.SaturatedFromStart {
		p := g.pick(-1, func(p *port) bool { return !faultNode(p) }, used)
		if p != nil {
			used[p], usedNodes[p.node] = true, true
			name := "port_xmit_discards"
			if p.ib {
				name = "symbol_error"
			}
			p.acc[p.idx[name]] = 65535 + 1000
			p.satFromStart = name
			g.labels = append(g.labels, Label{Type: "counter_saturated", Start: ts(g.cfg.Start, 0), Subject: g.subject(p)})
		}
	}
	if g.cfg.StableHighBER {
		for k := 0; k < 2; k++ {
			if p := g.pick(-1, func(p *port) bool { return p.drift == nil && (p.ib || p.ethOK) }, used); p != nil {
				used[p] = true
				if p.ib {
					p.baseBER = 2e-14 + g.r.Float64()*1e-13 // a few errors a minute, steady
				} else {
					p.baseBER = 5e-8 + g.r.Float64()*2e-7
				}
			}
		}
	}
	if g.cfg.Noise {
		g.planNoise(usedNodes, used)
		g.planSubThreshold(usedNodes, used)
	}
	sort.SliceStable(g.events, func(i, j int) bool { return g.events[i].at < g.events[j].at })
}

// planNoise schedules the mess on nodes and ports without faults (resets
// and restarts on fault nodes too, where they are harmless to the labels:
// a collector restart mid-fault is part of the test).
func (g *gen) planNoise(usedNodes map[string]bool, used map[*port]bool) {
	dur := g.cfg.Duration.Seconds()
	iv := g.cfg.Interval.Seconds()
	n := len(g.nodes)
	free := func() *node {
		for k := 0; k < 20; k++ {
			nd := g.nodes[g.r.IntN(n)]
			if !usedNodes[nd.name] {
				return nd
			}
		}
		return nil
	}
	count := func(per float64) int { return max(1, int(math.Round(per*dur/3600*float64(n)/10))) }
	// Collector restarts, anywhere (mid-fault included).
	for k := 0; k < count(2); k++ {
		nd := g.nodes[g.r.IntN(n)]
		g.at(60+g.r.Float64()*(dur-120), "restart", nil, nd, 0)
	}
	for _, st := range g.storms {
		// A restart of an origin's collector in the middle of its storm.
		if st.silentTo == 0 {
			mid := st.start + math.Min(40, (st.end-st.start)/2)
			if mid < dur {
				g.at(mid, "restart", nil, g.nodeOf(st.origin), 0)
			}
		}
	}
	// Driver reloads and perfquery -R on free nodes.
	for k := 0; k < count(1.5); k++ {
		if nd := free(); nd != nil {
			g.at(60+g.r.Float64()*(dur-120), "reload", nil, nd, float64(g.r.IntN(2)))
		}
	}
	for k := 0; k < count(1.5); k++ {
		if nd := free(); nd != nil {
			g.at(60+g.r.Float64()*(dur-120), "clear", nd.ports[g.r.IntN(len(nd.ports))], nd, 0)
		}
	}
	// Node gaps (1 to 15 min) and port gaps (a few intervals).
	for k := 0; k < count(1); k++ {
		if nd := free(); nd != nil {
			t := 60 + g.r.Float64()*(dur-120)
			g.at(t, "gap", nil, nd, 60+g.r.Float64()*840)
		}
	}
	for k := 0; k < count(2); k++ {
		if nd := free(); nd != nil {
			t := 60 + g.r.Float64()*(dur-120)
			g.at(t, "gap", nil, nd, iv*float64(2+g.r.IntN(6)))
		}
	}
	// A port DOWN for a while without a link_downed change? No: a DOWN port
	// always counts a link_downed; that is a labelled LinkDown fault.
	_ = used
}

// planStorm schedules a storm from port p over [at, end) and its victims.
func (g *gen) planStorm(p *port, at, end float64, silent bool) *stormState {
	g.at(at, "storm", p, nil, 1)
	g.at(end, "storm", p, nil, 0)
	st := &stormState{origin: p, start: at, end: end, victims: map[*port]float64{}, first: map[string]float64{}}
	if silent {
		st.silentTo = end + 5 + g.r.Float64()*30
	}
	g.storms = append(g.storms, st)
	// Victims: the other RoCE hosts of the leaf, soon; a random
	// set on one other leaf through the spine, a little later.
	other := -1
	if g.cfg.Leaves-g.cfg.IBLeaves > 1 && g.r.Float64() < 0.5 {
		for other == -1 || other == p.leaf {
			other = g.r.IntN(g.cfg.Leaves - g.cfg.IBLeaves)
		}
	}
	for _, q := range g.ports {
		if q.ib || q.node == p.node || !q.ethOK {
			continue
		}
		switch {
		case q.leaf == p.leaf:
			st.victims[q] = 0.3 + g.r.Float64()*2.5
		case q.leaf == other && g.r.Float64() < 0.5:
			st.victims[q] = 2 + g.r.Float64()*6
			if g.rn().Float64() < 0.5 {
				// A late victim: its flows cross the storm's
				// leaf only when its job's traffic shifts.
				st.victims[q] = 20 + g.rn().Float64()*70
			}
		}
	}
	return st
}

func (g *gen) subject(p *port) map[string]any {
	return map[string]any{"node": p.node, "device": p.dev, "port": p.num}
}

// phySubject is the sample whose PHY statistics show p's link: p's own, or
// on a RoCE LAG its member 0 (whose cable carries p's PHY physics).
func (g *gen) phySubject(p *port) map[string]any {
	if p.bond[0] != "" {
		return map[string]any{"node": p.node, "device": p.dev + "." + p.bond[0], "port": 1}
	}
	return g.subject(p)
}

func poisson(r *rand.Rand, mu float64) float64 {
	if mu <= 0 {
		return 0
	}
	if mu > 40 {
		return math.Max(0, math.Round(mu+math.Sqrt(mu)*r.NormFloat64()))
	}
	l, k, p := math.Exp(-mu), 0.0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func (g *gen) add(p *port, name string, v float64) {
	if i, ok := p.idx[name]; ok && v > 0 {
		p.acc[i] += v
	}
}

func (g *gen) stormOf(p *port) *stormState {
	for _, st := range g.storms {
		if st.origin == p {
			return st
		}
	}
	return nil
}

// run steps the fabric and takes the readings.
func (g *gen) run() {
	dur := g.cfg.Duration.Seconds()
	iv := g.cfg.Interval.Seconds()
	ev := 0
	seq := 0
	hot := map[int]int{}
	for t := 1.0; t <= dur+1e-9; t++ {
		for _, p := range g.ports {
			copy(p.prev, p.acc)
		}
		// Events at the step boundary.
		for ev < len(g.events) && g.events[ev].at <= t-1 {
			e := g.events[ev]
			ev++
			g.apply(e, hot, &seq)
			for _, p := range g.ports {
				copy(p.prev, p.acc)
			}
		}
		g.step(t, hot)
		// Readings in (t-1, t].
		for ni, nd := range g.nodes {
			for nd.next <= t {
				rt := nd.next
				jitSD, late := 0.02, 0.02
				if g.drawn() {
					jitSD, late = g.ph.JitterSec, g.ph.LateProb
				}
				jit := math.Abs(g.r.NormFloat64()) * jitSD
				if g.cfg.Noise && g.r.Float64() < late {
					jit = iv * (0.1 + 0.3*g.r.Float64()) // a busy host reads late
				}
				rt += jit
				if rt > t {
					rt = t
				}
				nd.next += iv
				if rt < nd.silentTo || rt > dur {
					continue
				}
				frac := 1 - (t - rt)
				for _, p := range nd.ports {
					g.read(ni, nd, p, rt, frac, &seq)
				}
			}
		}
	}
	g.finishLabels()
	g.order()
}

func (g *gen) apply(e event, hot map[int]int, seq *int) {
	if g.applyApp(e) {
		return
	}
	switch e.what {
	case "storm":
		e.p.stuck = e.v
		st := g.stormOf(e.p)
		if st.silentTo > 0 {
			nd := g.nodeOf(e.p)
			if e.v > 0 {
				nd.silentTo = st.silentTo
			}
		}
	case "np_disabled":
		e.p.npOff = e.v
	case "rp_ignoring":
		e.p.rpIgnore = e.v
	case "hot":
		if e.v > 0 {
			hot[e.p.leaf]++
		} else {
			hot[e.p.leaf]--
		}
	case "cnploss":
		g.cnpLoss = e.v
	case "down":
		e.p.down = e.v > 0
		if e.p.down {
			g.add(e.p, "link_downed", 1)
			g.add(e.p, "link_down_events_phy", 1)
			if e.p.m1 != nil {
				e.p.m1.acc["link_down_events_phy"]++
			}
		}
	case "restart":
		*seq++
		g.lines = append(g.lines, line{key: e.at, node: g.idxNode(e.n), seq: *seq,
			text: fmt.Appendf(nil, `{"kind":"collector_restart","ts":%q,"node":%q}`, ts(g.cfg.Start, e.at), e.n.name)})
		// The collector is down for a few seconds first.
		e.n.silentTo = math.Max(e.n.silentTo, e.at+1+g.r.Float64()*2*g.cfg.Interval.Seconds())
	case "reload":
		for _, p := range e.n.ports {
			for i, d := range p.defs {
				if d.src == 2 && d.name == "rx_bits_phy" {
					p.acc[i] = 0
					continue
				}
				p.acc[i] = 0
			}
			p.acc[p.idx["link_downed"]] = e.v // 0 or 1 after a reload
			if p.m1 != nil {
				for k := range p.m1.acc {
					p.m1.acc[k], p.m1.prev[k] = 0, 0
				}
			}
		}
		e.n.silentTo = math.Max(e.n.silentTo, e.at+3+g.r.Float64()*10)
	case "clear":
		for i, d := range e.p.defs {
			if d.src == 0 {
				e.p.acc[i] = 0
			}
		}
	case "gap":
		e.n.silentTo = math.Max(e.n.silentTo, e.at+e.v)
	}
}

func (g *gen) idxNode(n *node) int {
	for i, x := range g.nodes {
		if x == n {
			return i
		}
	}
	return 0
}

// step advances every accumulator by one second.
func (g *gen) step(t float64, hot map[int]int) {
	dur := g.cfg.Duration.Seconds()
	day := 0.55 + 0.45*math.Sin(2*math.Pi*(t/dur*0.8+0.1)) // a diurnal swell over the trace
	for l := range g.leafC {
		// Jobs start and stop: a few minutes to an hour each.
		if g.r.Float64() < 1.0/900 {
			g.leafOn[l] = !g.leafOn[l]
			g.leafJ[l] = math.Exp(g.r.NormFloat64() * 0.4)
		}
		target := 0.05
		if g.leafOn[l] {
			target = 0.25 * g.leafJ[l]
		}
		if hot[l] > 0 {
			target = math.Max(target, 0.4)
		}
		// Incast bursts: a few seconds of heavy congestion.
		if g.leafOn[l] && g.r.Float64() < 0.02 {
			target += 0.5
		}
		g.leafC[l] += 0.3*(target-g.leafC[l]) + 0.03*g.r.NormFloat64()
		g.leafC[l] = math.Min(1, math.Max(0, g.leafC[l]))
	}
	var cnpSent, txWeight float64
	for _, p := range g.ports {
		if p.down {
			continue
		}
		u := day * p.weight * 0.5 * math.Exp(0.35*g.r.NormFloat64())
		if g.leafOn[p.leaf] {
			u *= 1.4 * g.leafJ[p.leaf]
		} else {
			u *= 0.15
		}
		if g.drawn() {
			u *= g.ph.Utilisation
		}
		u = math.Min(0.95, math.Max(0.0005, u))
		u = math.Max(u, p.busy)
		c := g.leafC[p.leaf]
		if hot[p.leaf] > 0 {
			u = math.Max(u, 0.3)
		}
		rxU, txU := u, u*(0.8+0.4*g.r.Float64())
		// PFC.
		txPause, rxPause := 0.0, 0.0
		if !p.ib && c > 0.3 {
			// Incast: the receivers pause in bursts that congestion control
			// ends; a heavy second can be paused more than half the time.
			txPause = math.Min(0.6, (c-0.3)*0.9*g.r.Float64())
			rxPause = math.Min(0.4, (c-0.3)*0.5*g.r.Float64())
		}
		if p.stuck > 0 {
			txPause = 0.85 + 0.15*g.r.Float64()
			if g.r.Float64() < 0.08 {
				txPause = 0.55 + 0.3*g.r.Float64() // the stall eases for a moment
			}
			rxPause = 0
			rxU = 0.0003 * g.r.Float64()
		}
		for _, st := range g.storms {
			if d, ok := st.victims[p]; ok && t-1 >= st.start+d && t-1 < st.end+1 {
				frac := 0.45 + 0.45*g.r.Float64()
				if p.leaf != st.origin.leaf {
					frac = 0.3 + 0.3*g.r.Float64()
				}
				rxPause = math.Max(rxPause, frac)
				txU *= 1 - frac
				if _, seen := st.first[p.node]; !seen {
					st.first[p.node] = t - 1
				}
			}
		}
		rxB := rxU * p.rateGbps * 1e9 / 8
		txB := txU * p.rateGbps * 1e9 / 8
		g.add(p, "port_rcv_data", rxB/4)
		g.add(p, "port_xmit_data", txB/4)
		g.add(p, "port_rcv_packets", rxB/p.pktSize)
		g.add(p, "port_xmit_packets", txB/p.pktSize)
		g.add(p, "unicast_rcv_packets", rxB/p.pktSize)
		g.add(p, "unicast_xmit_packets", txB/p.pktSize)
		g.add(p, "multicast_rcv_packets", poisson(g.r, 0.2))
		g.add(p, "port_xmit_wait", c*c*4e5*g.r.Float64()+txPause*1e6)
		g.add(p, "rx_read_requests", rxB/p.pktSize*0.3)
		g.add(p, "rx_write_requests", rxB/p.pktSize*0.6)
		g.add(p, "out_of_sequence", poisson(g.r, c*0.5))
		g.add(p, "packet_seq_err", poisson(g.r, c*0.05))
		g.add(p, "duplicate_request", poisson(g.r, 0.01))
		if p.ib {
			g.stepIB(p, t)
		} else {
			g.stepEth(p, t, rxB, c, txPause, rxPause, &cnpSent)
			txWeight += txB
		}
		if p.m1 != nil {
			g.stepMember1(p)
		}
	}
	// CNPs reach the reaction points: the senders, by what they send.
	delivered := cnpSent * (1 - g.cnpLoss)
	if txWeight > 0 && delivered > 0 {
		for _, p := range g.ports {
			if p.ib || p.down {
				continue
			}
			i := p.idx["port_xmit_data"]
			got := delivered * (p.acc[i] - p.prev[i]) * 4 / txWeight
			got = poisson(g.r, got)
			ign := 0.0
			if p.rpIgnore > 0 {
				ign = math.Round(got * p.rpIgnore)
			} else if g.r.Float64() < 0.002 {
				ign = float64(1 + g.r.IntN(3)) // a stray ignored CNP
			}
			g.add(p, "rp_cnp_handled", got-ign)
			g.add(p, "rp_cnp_ignored", ign)
			g.add(p, "roce_slow_restart_cnps", poisson(g.r, got*0.001))
		}
	}
}

func (g *gen) stepEth(p *port, t, rxB, c, txPause, rxPause float64, cnpSent *float64) {
	// PHY bits run at line rate, traffic or not.
	bits := p.rateGbps * 1e9
	g.add(p, "rx_bits_phy", bits)
	// Temperature: slow AR(1) wander of ln BER, plus the diurnal cycle.
	p.wander = 0.997*p.wander + 0.02*g.r.NormFloat64()
	lnBER := math.Log(p.baseBER) + p.wander
	if d := p.drift; d != nil && t-1 >= d.At.Seconds() {
		if p.driftFrom == 0 {
			p.driftFrom = lnBER
		}
		x := (t - 1 - d.At.Seconds()) / d.Ramp.Seconds()
		lnBER = p.driftFrom + math.Pow(x, d.Shape)*(math.Log(1e-6)-p.driftFrom) + p.wander*0.3
		if d.Drawn.Doubling > 0 {
			lnBER = driftLnBER(d, p.driftBase, physicsRanges.CriticalEth, t-1) + p.wander*0.3
		}
	}
	ber := math.Exp(lnBER)
	g.stepApp(p, t, rxB/p.pktSize, c, ber)
	// Errors come in codeword clumps of 1-4 bits.
	events := poisson(g.r, ber*bits/2.2)
	errBits := 0.0
	if events > 200 {
		errBits = events * 2.2 * math.Exp(0.1*g.r.NormFloat64())
	} else {
		for k := 0.0; k < events; k++ {
			errBits += float64(1 + g.r.IntN(4))
		}
	}
	errBits = math.Round(errBits)
	g.add(p, "rx_corrected_bits_phy", errBits)
	lane := p.laneBias
	if p.drift == nil {
		lane = g.r.IntN(4)
	}
	if lanes := p.lanes; lanes > 0 && lanes < 4 {
		// Only the link's lanes carry errors: a 1X link counts them all
		// on lane 0.
		lane %= lanes
		g.add(p, fmt.Sprintf("rx_err_lane_%d_phy", lane), math.Round(errBits*0.7))
		g.add(p, fmt.Sprintf("rx_err_lane_%d_phy", (lane+1)%lanes), math.Round(errBits*0.3))
	} else {
		g.add(p, fmt.Sprintf("rx_err_lane_%d_phy", lane), math.Round(errBits*0.7))
		g.add(p, fmt.Sprintf("rx_err_lane_%d_phy", (lane+1)%4), math.Round(errBits*0.3))
	}
	if ber > 3e-7 {
		g.add(p, "rx_pcs_symbol_err_phy", poisson(g.r, ber*bits*1e-7))
	}
	// Congestion control.
	pkts := rxB / p.pktSize
	marks := poisson(g.r, pkts*p.markProb*c*c)
	g.add(p, "np_ecn_marked_roce_packets", marks)
	sent := 0.0
	if p.npOff == 0 {
		sent = poisson(g.r, marks*p.npRatio)
	}
	g.add(p, "np_cnp_sent", sent)
	*cnpSent += sent
	g.add(p, "roce_adp_retrans", poisson(g.r, c*0.2))
	if c > 0.7 {
		g.add(p, "out_of_buffer", poisson(g.r, (c-0.7)*20))
		g.add(p, "rx_discards_phy", poisson(g.r, (c-0.7)*5))
	}
	// A host that cannot drain its NIC pauses the lossless priority a
	// little (transport.go's StarvationDiscards).
	txPause = math.Max(txPause, p.app.pauseTx)
	// Pauses: duration in µs, one frame per ~120 µs paused.
	pr := g.prio
	g.add(p, fmt.Sprintf("tx_prio%d_pause_duration", pr), math.Round(txPause*1e6))
	g.add(p, fmt.Sprintf("tx_prio%d_pause", pr), math.Round(txPause*1e6/120*(0.8+0.4*g.r.Float64())))
	g.add(p, fmt.Sprintf("rx_prio%d_pause_duration", pr), math.Round(rxPause*1e6))
	g.add(p, fmt.Sprintf("rx_prio%d_pause", pr), math.Round(rxPause*1e6/120*(0.8+0.4*g.r.Float64())))
	if p.stuck > 0 {
		if nd := g.nodeOf(p); nd != nil && nd.watchdog && g.r.Float64() < 0.05 {
			g.add(p, "tx_pause_storm_warning_events", 1)
		}
	}
}

func (g *gen) stepIB(p *port, t float64) {
	bits := p.rateGbps * 1e9
	p.wander = 0.999*p.wander + 0.009*g.r.NormFloat64() // sd ~0.2: a healthy link is steady
	lnBER := math.Log(p.baseBER) + p.wander
	if d := p.drift; d != nil && t-1 >= d.At.Seconds() {
		if p.driftFrom == 0 {
			p.driftFrom = lnBER
		}
		x := (t - 1 - d.At.Seconds()) / d.Ramp.Seconds()
		lnBER = p.driftFrom + math.Pow(x, d.Shape)*(math.Log(1e-12)-p.driftFrom)
		if d.Drawn.Doubling > 0 {
			lnBER = driftLnBER(d, p.driftBase, physicsRanges.CriticalIB, t-1)
		}
	}
	ev := poisson(g.r, math.Exp(lnBER)*bits)
	// A retrain now and then on a healthy link: a burst and a recovery.
	if g.cfg.Noise && g.r.Float64() < 1.0/(6*3600) && p.drift == nil {
		ev += float64(5 + g.r.IntN(60))
		g.add(p, "link_error_recovery", 1)
	}
	g.add(p, "symbol_error", ev)
	if ev > 0 && g.r.Float64() < 0.1 {
		g.add(p, "port_rcv_errors", 1)
	}
}

// read emits one port's line at time rt (seconds), interpolating; on a RoCE
// LAG, the bond's line and one line per member (nic.go).
func (g *gen) read(ni int, nd *node, p *port, rt, frac float64, seq *int) {
	g.readView(ni, p, rt, frac, seq, viewPort)
	if p.bond[0] != "" {
		g.readView(ni, p, rt, frac, seq, viewMember0)
		g.readView(ni, p, rt, frac, seq, viewMember1)
	}
}

// Views of a port's reading: the port (or a bond's RDMA port) and a LAG's
// two member netdevs.
const (
	viewPort = iota
	viewMember0
	viewMember1
)

func (g *gen) readView(ni int, p *port, rt, frac float64, seq *int, view int) {
	bonded := p.bond[0] != ""
	// The member lines' read noise draws from the member's own source, so
	// the port's line and the physics keep the main source's sequence.
	r := g.r
	if view != viewPort {
		r = p.m1.r
	}
	var b strings.Builder
	state := "ACTIVE"
	if p.down {
		state = "DOWN"
	}
	if ni%3 == 0 {
		// Some collectors keep the sysfs text as it is.
		if p.down {
			state = "1: DOWN"
		} else {
			state = "4: ACTIVE"
		}
	}
	if view != viewPort && g.cfg.Noise && r.Float64() < 0.002 {
		// A member's statistics come from one ethtool ioctl: a failed
		// read loses the whole sample, never one statistic of it.
		return
	}
	dev, netdev := p.dev, p.netdev
	if view != viewPort {
		netdev = p.bond[view-viewMember0]
		dev += "." + netdev
	}
	fmt.Fprintf(&b, `{"kind":"sample","ts":%q,"node":%q,"device":%q,"port":%d`, ts(g.cfg.Start, rt), p.node, dev, p.num)
	if netdev != "" {
		fmt.Fprintf(&b, `,"netdev":%q`, netdev)
	}
	ll := "Ethernet"
	if p.ib {
		ll = "InfiniBand"
	}
	fmt.Fprintf(&b, `,"link_layer":%q,"state":%q,"rate":%q`, ll, state, p.rateText)
	vals := map[string]uint64{}
	for src, key := range []string{"counters", "hw_counters", "ethtool"} {
		if src == 1 && !p.hwOK || src == 2 && !p.ethOK || view != viewPort && src != 2 {
			continue
		}
		fmt.Fprintf(&b, `,%q:{`, key)
		first := true
		for i, d := range p.defs {
			if d.src != src {
				continue
			}
			name := d.name
			if src == 2 {
				// What the profile lists, under its name: a bond's line
				// has the non-PHY statistics, a member's the PHY ones.
				name = g.outName(d.name)
				if bonded && phyStat(d.name) != (view != viewPort) {
					name = ""
				}
				if view == viewMember1 && name != "" && !p.m1.has(d.name) {
					name = ""
				}
			}
			v := p.prev[i] + (p.acc[i]-p.prev[i])*frac
			if view == viewMember1 {
				v = p.m1.prev[d.name] + (p.m1.acc[d.name]-p.m1.prev[d.name])*frac
			}
			if bonded && view == viewPort && src == 2 && perLink(d.name) {
				v *= 2 // the sum over the two member links
			}
			v = math.Floor(v)
			if d.max > 0 && v >= d.max {
				v = d.max
				g.noteSaturated(p, d.name, rt)
			}
			var u uint64
			if d.wrap {
				u = uint64(v) % (1 << 32)
			} else {
				u = uint64(v)
			}
			if g.cfg.Noise && view == viewPort {
				x := r.Float64()
				if x < 0.0004 {
					continue // the file could not be read
				}
				if x < 0.0008 && d.max == 0 {
					u = 0 // rdmamap read 0
				}
			}
			if name == "" {
				continue // drawn above all the same: one seed, one physics
			}
			vals[name] = u
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(strconv.Quote(name))
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(u, 10))
		}
		if src == 1 {
			if !first {
				b.WriteByte(',')
			}
			b.WriteString(`"lifespan":12`)
		}
		if src == 2 {
			for _, kv := range g.derivedStats(vals, !bonded || view != viewPort) {
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.WriteString(kv)
			}
		}
		b.WriteByte('}')
	}
	if view == viewPort {
		g.writeConfig(&b, p, rt)
	}
	b.WriteByte('}')
	*seq++
	g.lines = append(g.lines, line{key: rt, node: ni, seq: *seq, text: []byte(b.String())})
}

// noteSaturated labels a counter_saturated the first time a saturating
// counter of p reads its maximum (a drift past critical that runs on pins
// symbol_error), unless it was pinned from the first line (labelled then).
func (g *gen) noteSaturated(p *port, name string, rt float64) {
	if p.satSeen[name] || name == p.satFromStart {
		return
	}
	if p.satSeen == nil {
		p.satSeen = map[string]bool{}
	}
	p.satSeen[name] = true
	g.labels = append(g.labels, Label{Type: "counter_saturated", Start: ts(g.cfg.Start, rt), Subject: g.subject(p)})
}

func (g *gen) finishLabels() {
	dur := g.cfg.Duration.Seconds()
	for _, st := range g.storms {
		l := Label{Type: "pfc_storm", Start: ts(g.cfg.Start, st.start), Subject: g.subject(st.origin), Cause: st.cause}
		if st.end < dur {
			e := ts(g.cfg.Start, st.end)
			l.End = &e
		}
		names := make([]string, 0, len(st.first))
		for n := range st.first {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			l.Affected = append(l.Affected, LabelAffected{Node: n, FirstSeen: ts(g.cfg.Start, st.first[n])})
		}
		g.labels = append(g.labels, l)
	}
	sort.SliceStable(g.labels, func(i, j int) bool { return g.labels[i].Start < g.labels[j].Start })
}

// order sorts the lines as a collector fleet delivers them: each node's
// lines in time order, nodes out of order with each other by up to an
// interval, and some lines delivered twice, far from the original.
func (g *gen) order() {
	iv := g.cfg.Interval.Seconds()
	if g.cfg.Noise {
		last := make([]float64, len(g.nodes))
		for i := range last {
			last[i] = -1e18
		}
		sort.SliceStable(g.lines, func(i, j int) bool { return g.lines[i].key < g.lines[j].key })
		delay := make([]float64, len(g.nodes))
		for i := range g.lines {
			l := &g.lines[i]
			if g.r.Float64() < 0.05 {
				delay[l.node] = g.r.Float64() * iv * 0.9
			}
			k := math.Max(l.key+delay[l.node], last[l.node]+1e-6)
			l.key, last[l.node] = k, k
		}
		var dups []line
		for _, l := range g.lines {
			if g.r.Float64() < 0.003 {
				d := l
				d.key += iv * float64(1+g.r.IntN(30))
				d.seq += 1 << 40
				dups = append(dups, d)
			}
		}
		g.lines = append(g.lines, dups...)
	}
	sort.SliceStable(g.lines, func(i, j int) bool {
		if g.lines[i].key != g.lines[j].key {
			return g.lines[i].key < g.lines[j].key
		}
		return g.lines[i].seq < g.lines[j].seq
	})
}

func (g *gen) topology() []byte {
	type sw struct {
		Name string `json:"name"`
		Tier string `json:"tier"`
	}
	type link struct {
		A string `json:"a"`
		B string `json:"b"`
	}
	var t struct {
		Fabric   string `json:"fabric"`
		Switches []sw   `json:"switches"`
		Links    []link `json:"links"`
	}
	t.Fabric = g.cfg.Fabric
	spines := 2
	for l := 0; l < g.cfg.Leaves; l++ {
		t.Switches = append(t.Switches, sw{fmt.Sprintf("lf%02d", l+1), "leaf"})
	}
	for s := 0; s < spines; s++ {
		t.Switches = append(t.Switches, sw{fmt.Sprintf("sp%02d", s+1), "spine"})
	}
	swp := map[int]int{}
	for _, p := range g.ports {
		swp[p.leaf]++
		t.Links = append(t.Links, link{fmt.Sprintf("%s/%s/%d", p.node, p.dev, p.num), fmt.Sprintf("lf%02d/Ethernet%d", p.leaf+1, swp[p.leaf])})
	}
	for l := 0; l < g.cfg.Leaves; l++ {
		for s := 0; s < spines; s++ {
			t.Links = append(t.Links, link{fmt.Sprintf("lf%02d/Ethernet%d", l+1, 60+s), fmt.Sprintf("sp%02d/Ethernet%d", s+1, l+1)})
		}
	}
	b, _ := json.MarshalIndent(t, "", " ")
	return b
}
