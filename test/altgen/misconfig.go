package altgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Port configuration (the trace's optional `config` object) and the
// misconfigurations of docs/formats.md's config_mismatch: "settings that
// disagree: MTU across a link or a fabric's RoCE ports, PFC or ECN off on
// the priority the rest of the fabric uses".
//
// The model, from that text only: a RoCE fabric is set up alike (one MTU,
// PFC, the ECN notification and reaction points on the lossless priority,
// the same one the pause counters use); a misconfiguration is one port
// whose setting is changed at a moment and put back later. A notification
// point switched off stops answering ECN marks with CNPs, a reaction point
// switched off ignores the CNPs it receives: the cnp_ecn_imbalance those
// cause is labelled with the config_mismatch as its cause.
//
// Noise, none of it a mismatch: hosts that report their config on every
// line, others only when it changes, old hosts that report only the MTU and
// trust mode, hosts that report none; PFC on an extra priority besides the
// lossless one; a mix of trust modes; IPoIB MTUs on InfiniBand ports.
const (
	ConfigNoise  = "config_noise"   // every host reports its config (healthy)
	ConfigMTU    = "config_mtu"     // one RoCE port's MTU differs from the fabric's
	ConfigPFCOff = "config_pfc_off" // PFC off on the lossless priority
	ConfigNPOff  = "config_np_off"  // ECN notification point off: no CNPs
	ConfigRPOff  = "config_rp_off"  // ECN reaction point off: CNPs ignored
)

// How a host reports its config.
const (
	reportEvery   = iota // on every line
	reportChange         // on its first line and when it changes
	reportPartial        // MTU and trust only, every line
	reportNone           // nothing
)

type confState struct {
	r     *rand.Rand
	mtu   int // the fabric's
	ports map[*port]*confPort
}

type confPort struct {
	report int
	mtu    int
	pfc    []int
	np, rp []int
	trust  string
	// changes are the misconfigurations over time.
	changes []confChange
	last    string // the config last written (reportChange)
}

type confChange struct {
	from, to float64
	apply    func(c *confPort)
}

// misconfigPreset is the "misconfig" preset: config noise everywhere, one
// of each misconfiguration.
func misconfigPreset(cfg *Config, r *rand.Rand) {
	m := func(a, b int) time.Duration { return time.Duration(a+r.IntN(b-a+1)) * time.Minute }
	cfg.Duration = m(45, 55)
	cfg.Leaves, cfg.HostsPerLeaf, cfg.IBLeaves = 3+r.IntN(2), 4+r.IntN(3), r.IntN(2)
	cfg.Faults = []Fault{
		{Kind: ConfigNoise},
		{Kind: ConfigMTU, At: m(4, 8), Dur: m(5, 10)},
		{Kind: ConfigPFCOff, At: m(12, 16), Dur: m(6, 10)},
		{Kind: ConfigNPOff, At: m(20, 24), Dur: m(6, 9)},
		{Kind: ConfigRPOff, At: m(30, 34), Dur: m(6, 9)},
		{Kind: ConfigMTU, At: m(38, 42)}, // never put back
	}
}

func (g *gen) conf() *confState {
	if g.confState == nil {
		r := rand.New(rand.NewPCG(g.cfg.Seed^0xc0f1, 12))
		g.confState = &confState{r: r, mtu: []int{4200, 9000}[r.IntN(2)], ports: map[*port]*confPort{}}
	}
	return g.confState
}

// confPortOf is p's configuration, set up on first use.
func (g *gen) confPortOf(p *port) *confPort {
	cs := g.conf()
	if c, ok := cs.ports[p]; ok {
		return c
	}
	r := cs.r
	c := &confPort{trust: "dscp"}
	switch x := r.Float64(); {
	case x < 0.45:
		c.report = reportEvery
	case x < 0.85:
		c.report = reportChange
	case x < 0.95:
		c.report = reportPartial
	default:
		c.report = reportNone
	}
	if p.ib {
		c.mtu = []int{2044, 4092}[r.IntN(2)] // IPoIB
		if p.netdev == "" {
			c.report = reportNone
		}
	} else {
		c.mtu = cs.mtu
		c.pfc, c.np, c.rp = []int{g.prio}, []int{g.prio}, []int{g.prio}
		if r.Float64() < 0.1 {
			c.pfc = []int{0, g.prio} // an extra lossless class
		}
		if r.Float64() < 0.15 {
			c.trust = "pcp"
		}
		if g.nicProfile() == NICGlobalPause {
			c.pfc = []int{} // link-level flow control: PFC on no priority
		}
	}
	cs.ports[p] = c
	return c
}

// planConfig plans one config fault; false if the kind is not one.
func (g *gen) planConfig(f Fault, used map[*port]bool, usedNodes map[string]bool) bool {
	switch f.Kind {
	case ConfigNoise:
		g.conf()
		return true
	case ConfigMTU, ConfigPFCOff, ConfigNPOff, ConfigRPOff:
	default:
		return false
	}
	cs := g.conf()
	dur := g.cfg.Duration.Seconds()
	at := f.At.Seconds()
	end := dur + 1e9
	if f.Dur > 0 {
		end = at + f.Dur.Seconds()
	}
	p := g.pick(cs.r.IntN(1<<20), func(p *port) bool { return !p.ib && p.hwOK && !usedNodes[p.node] }, used)
	if p == nil {
		return true
	}
	used[p], usedNodes[p.node] = true, true
	c := g.confPortOf(p)
	c.report = []int{reportEvery, reportChange}[cs.r.IntN(2)] // a fault on a port that says nothing is no test
	var apply func(c *confPort)
	switch f.Kind {
	case ConfigMTU:
		bad := 1500
		if cs.mtu == 4200 && cs.r.IntN(2) == 0 {
			bad = 9000
		}
		apply = func(c *confPort) { c.mtu = bad }
	case ConfigPFCOff:
		other := []int{}
		if cs.r.IntN(2) == 0 {
			other = []int{(g.prio + 1 + cs.r.IntN(7)) % 8} // PFC moved to the wrong priority
		}
		apply = func(c *confPort) { c.pfc = other }
	case ConfigNPOff:
		apply = func(c *confPort) { c.np = without(c.np, g.prio) }
	case ConfigRPOff:
		apply = func(c *confPort) { c.rp = without(c.rp, g.prio) }
	}
	c.changes = append(c.changes, confChange{from: at, to: end, apply: apply})
	label := func(typ string, from float64) *Label {
		l := Label{Type: typ, Start: ts(g.cfg.Start, from), Subject: g.subject(p)}
		if end < dur {
			e := ts(g.cfg.Start, end)
			l.End = &e
		}
		g.labels = append(g.labels, l)
		return &g.labels[len(g.labels)-1]
	}
	label("config_mismatch", at)
	if f.Kind == ConfigNPOff || f.Kind == ConfigRPOff {
		// The counters show what the setting does: marks answered by no
		// CNPs, or CNPs ignored, on a congested leaf.
		kind, v := NPDisabled, 1.0
		if f.Kind == ConfigRPOff {
			kind = RPIgnoring
		}
		g.at(at, kind, p, nil, v)
		g.at(end, kind, p, nil, 0)
		g.at(at-120, "hot", p, nil, 1)
		g.at(end+60, "hot", p, nil, 0)
		l := label("cnp_ecn_imbalance", at)
		l.Cause = &LabelCause{Type: "config_mismatch", Subject: g.subject(p)}
	}
	return true
}

func without(list []int, p int) []int {
	var out []int
	for _, x := range list {
		if x != p {
			out = append(out, x)
		}
	}
	if out == nil {
		out = []int{}
	}
	return out
}

// writeConfig appends the port's config to its line at read time rt, as
// its host reports it.
func (g *gen) writeConfig(b *strings.Builder, p *port, rt float64) {
	if g.confState == nil {
		return
	}
	base := g.confPortOf(p)
	if base.report == reportNone {
		return
	}
	c := *base
	for _, ch := range base.changes {
		if rt >= ch.from && rt < ch.to {
			ch.apply(&c)
		}
	}
	var o strings.Builder
	fmt.Fprintf(&o, `,"config":{"mtu":%d`, c.mtu)
	if !p.ib && c.report != reportPartial {
		for _, k := range []struct {
			key  string
			list []int
		}{{"pfc_enabled", c.pfc}, {"ecn_np_enabled", c.np}, {"ecn_rp_enabled", c.rp}} {
			o.WriteString(`,"` + k.key + `":[`)
			for i, x := range k.list {
				if i > 0 {
					o.WriteByte(',')
				}
				o.WriteString(strconv.Itoa(x))
			}
			o.WriteByte(']')
		}
	}
	if !p.ib {
		fmt.Fprintf(&o, `,"trust":%q`, c.trust)
	}
	o.WriteByte('}')
	s := o.String()
	if base.report == reportChange && s == base.last {
		return
	}
	base.last = s
	b.WriteString(s)
}
