package pfcstorm

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/pause"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// rigTopo: host-a..host-d on leaf-01, host-e and host-f on leaf-02, one
// spine.
const rigTopo = `{"fabric":"t","switches":[{"name":"leaf-01","tier":"leaf"},{"name":"leaf-02","tier":"leaf"},{"name":"spine-01","tier":"spine"}],
"links":[{"a":"host-a/mlx5_0/1","b":"leaf-01/swp1"},{"a":"host-b/mlx5_0/1","b":"leaf-01/swp2"},
{"a":"host-c/mlx5_0/1","b":"leaf-01/swp3"},{"a":"host-d/mlx5_0/1","b":"leaf-01/swp4"},
{"a":"host-e/mlx5_0/1","b":"leaf-02/swp1"},{"a":"host-f/mlx5_0/1","b":"leaf-02/swp2"},
{"a":"leaf-01/swp49","b":"spine-01/swp1"},{"a":"leaf-02/swp49","b":"spine-01/swp2"}]}`

var hosts = []string{"host-a", "host-b", "host-c", "host-d", "host-e", "host-f"}

func portOf(node string) schemas.PortID {
	return schemas.PortID{Node: node, Device: "mlx5_0", Port: 1}
}

// rig drives the detector the way the runtime does: per-port order,
// stale samples dropped, the port observed after the detectors, and the
// watermark one interval (plus a tenth) behind the newest sample, ticking
// fabric detectors every second of data time.
type rig struct {
	t        *testing.T
	det      *Detector
	topo     *schemas.Topology
	ports    map[schemas.PortID]*processor.PortState
	maxT, wm schemas.Millis
	nextTick schemas.Millis
	lateness schemas.Millis
	events   []*schemas.Event
	totals   map[schemas.PortID]map[string]uint64
	// pauseNames: the pause counters the ports list; perPriority unless
	// a test puts the fabric on 802.3x global pause.
	pauseNames naming
	// dets, when set, are the detectors fed instead of det alone (det
	// among them, linked for causes).
	dets []processor.Detector
}

// withDetectors makes the rig drive the storm detector together with
// others, their events passing through one Causes as in a processor.
func (r *rig) withDetectors(others ...processor.Detector) {
	r.dets = processor.Link(append([]processor.Detector{r.det}, others...))
	for _, d := range r.dets[1:] {
		if in, ok := d.(processor.Initializer); ok {
			if err := in.Init(r); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// naming is how a driver names a port's pause counters: tx duration, tx
// frames, rx duration, rx frames.
type naming [4]string

var (
	perPriority  = naming{"tx_prio3_pause_duration", "tx_prio3_pause", "rx_prio3_pause_duration", "rx_prio3_pause"}
	globalMLX5   = naming{"tx_global_pause_duration", "tx_global_pause", "rx_global_pause_duration", "rx_global_pause"}
	globalMLX4EN = naming{"tx_pause_duration", "tx_pause", "rx_pause_duration", "rx_pause"}
)

func newPFCRig(t *testing.T, interval time.Duration) *rig {
	topo, err := schemas.ParseTopology(strings.NewReader(rigTopo))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, det: New(), topo: topo, ports: map[schemas.PortID]*processor.PortState{},
		lateness: schemas.Millis(interval.Milliseconds() * 11 / 10), totals: map[schemas.PortID]map[string]uint64{},
		pauseNames: perPriority}
	if err := r.det.Init(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) Topology() *schemas.Topology { return r.topo }
func (r *rig) Watermark() schemas.Millis   { return r.wm }
func (r *rig) Complete() bool              { return true }
func (r *rig) Port(id schemas.PortID) (*processor.PortState, bool) {
	p, ok := r.ports[id]
	return p, ok
}
func (r *rig) Ports(fn func(*processor.PortState) bool) {
	ids := make([]schemas.PortID, 0, len(r.ports))
	for id := range r.ports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if !fn(r.ports[id]) {
			return
		}
	}
}

func (r *rig) Emit(ev *schemas.Event) {
	if err := ev.Validate(); err != nil {
		r.t.Errorf("invalid event: %v", err)
	}
	for k, v := range ev.Evidence {
		if ev.Type != schemas.TypePFCStorm {
			break
		}
		switch v.(type) {
		case float64, int, uint64:
		case string:
			if k != "flow_control" {
				r.t.Errorf("evidence %s is a string, want a number", k)
			}
		default:
			r.t.Errorf("evidence %s is %T, want a number", k, v)
		}
	}
	r.events = append(r.events, ev)
}

func (r *rig) feed(s *processor.Sample) {
	ctx := context.Background()
	p, ok := r.ports[s.ID]
	if !ok {
		p = processor.NewPortState(s.ID)
		r.ports[s.ID] = p
	}
	if p.Samples > 0 && s.Time <= p.LastTime {
		return
	}
	dets := r.dets
	if dets == nil {
		dets = []processor.Detector{r.det}
	}
	for _, d := range dets {
		if pd, ok := d.(processor.PortDetector); ok {
			pd.OnSample(ctx, p, s, r)
		}
	}
	p.Observe(s)
	r.maxT = max(r.maxT, s.Time)
	if wm := r.maxT - r.lateness; wm > r.wm {
		r.wm = wm
		if wm >= r.nextTick {
			for _, d := range dets {
				if fd, ok := d.(processor.FabricDetector); ok {
					fd.OnWatermark(ctx, r, wm, r)
				}
			}
			r.nextTick = wm + 1000
		}
	}
}

// reading is what a port does in one interval.
type reading struct {
	skip       bool // no sample (gap, silent node)
	baseline   bool // collector (re)start: every counter FlagFirst
	reset      bool // counters cleared: FlagReset
	tx, rx     float64
	rcvGbps    float64
	ecnPerS    float64
	cnpSent    float64
	cnpHandled float64
	warn, errs uint64
	oobPerS    float64 // out_of_buffer drops a second (a starving receiver)
	// lag: the port is a RoCE LAG over this many member links, each
	// pausing tx/rx: the sample sums their pause counters and carries
	// schemas.GaugeLAGMembers (0 or 1: an ordinary port). noGauge leaves
	// the gauge out, as a trace from before it.
	lag     int
	noGauge bool
}

// sample builds one port's sample from a reading; cumulative values are
// kept per port so Value moves as the hardware's would.
func (r *rig) sample(id schemas.PortID, at schemas.Millis, interval time.Duration, rd reading) *processor.Sample {
	tot := r.totals[id]
	if tot == nil {
		tot = map[string]uint64{}
		r.totals[id] = tot
	}
	sec := interval.Seconds()
	links := float64(max(rd.lag, 1)) // a LAG's pause counters sum its links'
	deltas := []struct {
		src  schemas.Source
		name string
		d    uint64
	}{
		{schemas.SourceEthtool, r.pauseNames[0], uint64(links * rd.tx * sec * 1e6)},
		{schemas.SourceEthtool, r.pauseNames[1], uint64(links * rd.tx * sec * 1e6 / 80)},
		{schemas.SourceEthtool, r.pauseNames[2], uint64(links * rd.rx * sec * 1e6)},
		{schemas.SourceEthtool, r.pauseNames[3], uint64(links * rd.rx * sec * 1e6 / 80)},
		{schemas.SourceEthtool, "tx_pause_storm_warning_events", rd.warn},
		{schemas.SourceEthtool, "tx_pause_storm_error_events", rd.errs},
		{schemas.SourceCounters, "port_rcv_data", uint64(rd.rcvGbps * 1e9 / 8 * sec)},
		{schemas.SourceHWCounters, "out_of_buffer", uint64(rd.oobPerS * sec)},
		{schemas.SourceHWCounters, "np_ecn_marked_roce_packets", uint64(rd.ecnPerS * sec)},
		{schemas.SourceHWCounters, "np_cnp_sent", uint64(rd.cnpSent * sec)},
		{schemas.SourceHWCounters, "rp_cnp_handled", uint64(rd.cnpHandled * sec)},
	}
	if r.pauseNames == perPriority {
		// PFC on two priorities; only priority 3 carries the pauses.
		deltas = append(deltas, struct {
			src  schemas.Source
			name string
			d    uint64
		}{schemas.SourceEthtool, "tx_prio0_pause_duration", 0})
	}
	var cs []schemas.CounterDelta
	for _, d := range deltas {
		c := schemas.CounterDelta{Name: d.name, Source: d.src}
		switch {
		case rd.baseline:
			tot[d.name] += d.d
			c.Value, c.Flags = tot[d.name], schemas.FlagFirst
		case rd.reset:
			tot[d.name] = d.d
			c.Value, c.Delta, c.Flags = d.d, d.d, schemas.FlagReset
		default:
			tot[d.name] += d.d
			c.Value, c.Delta = tot[d.name], d.d
		}
		cs = append(cs, c)
	}
	iv := interval.Milliseconds()
	if rd.baseline {
		iv = 0
	}
	ps := &schemas.PortSample{Device: id.Device, Port: id.Port,
		Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
		TimeMs: int64(at), IntervalMs: iv, Counters: cs}
	if rd.lag > 1 && !rd.noGauge {
		ps.Netdev = "bond0"
		ps.Gauges = map[string]uint64{schemas.GaugeLAGMembers: uint64(rd.lag), "lifespan": 10}
	}
	return &processor.Sample{ID: id, Time: at, PortSample: ps}
}

// run feeds n intervals of every host; plan says what host h does in
// interval k (k = 0 is the baseline). Hosts are read 37 ms apart.
func (r *rig) run(interval time.Duration, n int, plan func(host string, k int) reading) {
	for k := range n {
		for i, h := range hosts {
			rd := plan(h, k)
			if k == 0 {
				rd.baseline = true
			}
			if rd.skip {
				continue
			}
			at := detecttest.T0 + schemas.Millis(int64(k)*interval.Milliseconds()+int64(i)*37)
			r.feed(r.sample(portOf(h), at, interval, rd))
		}
	}
}

func healthy() reading {
	return reading{tx: 0.0005, rx: 0.0008, rcvGbps: 60, ecnPerS: 20, cnpSent: 10, cnpHandled: 12}
}

// stormPlan: host-a storms over intervals [from, to) (the first one partial),
// host-b and host-c are paused, host-d is not; host-e on the other leaf is
// paused from interval eFrom on (-1: never).
func stormPlan(from, to, eFrom int, silent bool, dip int) func(string, int) reading {
	return func(h string, k int) reading {
		on := k >= from && k < to && k != dip
		rd := healthy()
		switch h {
		case "host-a":
			if silent && k >= from {
				return reading{skip: true}
			}
			if on {
				rd.tx, rd.rcvGbps, rd.ecnPerS, rd.cnpSent = 0.95, 0.2, 0, 0
				if k == from {
					rd.tx = 0.3 // the storm began late in the interval
				}
				if k == from+1 {
					rd.warn = 1
				}
			}
		case "host-b", "host-c":
			if on && k > from || on && k == from && !silent {
				rd.rx, rd.rcvGbps = 0.55, 25
			}
		case "host-e":
			if eFrom >= 0 && on && k >= eFrom {
				rd.rx = 0.3
			}
		}
		return rd
	}
}

func (r *rig) ofType(state string) []*schemas.Event {
	var out []*schemas.Event
	for _, ev := range r.events {
		if state == "" || ev.State == state {
			out = append(out, ev)
		}
	}
	return out
}

func TestPFCStorm(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		silent   bool
		dip      int
		eFrom    int
		// latency budget in intervals from the storm's true onset
		budget   int
		affected []string // nodes, in first_seen order
	}{
		{"origin reports, 1 s", time.Second, false, -1, -1, 2, []string{"host-b", "host-c"}},
		{"origin reports, 5 s", 5 * time.Second, false, -1, -1, 2, []string{"host-b", "host-c"}},
		{"origin reports, 10 s", 10 * time.Second, false, -1, -1, 2, []string{"host-b", "host-c"}},
		{"silent origin, 1 s", time.Second, true, -1, -1, 3, []string{"host-b", "host-c"}},
		{"silent origin, 5 s", 5 * time.Second, true, -1, -1, 3, []string{"host-b", "host-c"}},
		{"dips one interval", 2 * time.Second, false, 40, -1, 2, []string{"host-b", "host-c"}},
		{"silent origin dips one interval", 2 * time.Second, true, 40, -1, 3, []string{"host-b", "host-c"}},
		{"spreads to the other leaf", 5 * time.Second, false, -1, 25, 2, []string{"host-b", "host-c", "host-e"}},
		{"a late victim on the other leaf joins while the storm lasts", 5 * time.Second, false, -1, 32, 2, []string{"host-b", "host-c", "host-e"}},
		{"a late victim on the other leaf joins, 10 s", 10 * time.Second, false, -1, 30, 2, []string{"host-b", "host-c", "host-e"}},
	}
	for _, tt := range tests {
		for _, names := range namings {
			t.Run(names.name+"/"+tt.name, func(t *testing.T) {
				const from, to, n = 20, 60, 90
				r := newPFCRig(t, tt.interval)
				r.pauseNames = names.counters
				r.run(tt.interval, n, stormPlan(from, to, tt.eFrom, tt.silent, tt.dip))
				testPFCStormIncident(t, r, tt.interval, from, tt.budget, tt.silent, tt.affected)
				if open := r.ofType(schemas.StateOpen); len(open) == 1 && !tt.silent {
					wantPrio := 3
					if names.counters != perPriority {
						wantPrio = pause.GlobalPrio
					}
					if open[0].Evidence["priority"] != wantPrio || open[0].Evidence["flow_control"] != pause.FlowControl(wantPrio) {
						t.Errorf("priority %v flow_control %v, want %d", open[0].Evidence["priority"], open[0].Evidence["flow_control"], wantPrio)
					}
				}
			})
		}
	}
}

// namings are the pause counters a fabric can count: PFC per priority,
// or IEEE 802.3x global pause under mlx5's and mlx4_en's names. The storm
// tests run on each: the same pauses are the same incidents.
var namings = []struct {
	name     string
	counters naming
}{{"pfc", perPriority}, {"global-mlx5", globalMLX5}, {"global-mlx4_en", globalMLX4EN}}

// testPFCStormIncident checks the one storm of a stormPlan run: opened
// once within budget intervals of the true onset, origin host-a, the
// affected nodes in first_seen order with their hops, one incident.
func testPFCStormIncident(t *testing.T, r *rig, interval time.Duration, from, budget int, silent bool, affected []string) {
	t.Helper()
	for _, l := range summaries(r.events) {
		t.Log(l)
	}
	if got := len(r.ofType(schemas.StateOpen)); got != 1 {
		t.Fatalf("%d opens, want 1: %v", got, summaries(r.events))
	}
	if !silent {
		if got := len(r.ofType(schemas.StateResolved)); got != 1 {
			t.Errorf("%d resolved, want 1: %v", got, summaries(r.events))
		}
	} else if got := len(r.ofType(schemas.StateResolved)); got > 1 {
		t.Errorf("%d resolved", got)
	}
	open := r.ofType(schemas.StateOpen)[0]
	iv := schemas.Millis(interval.Milliseconds())
	// True onset: 30% of interval `from` before its end.
	onset := detecttest.T0 + schemas.Millis(from)*iv - iv*3/10
	if lat := open.DetectedAt - onset; lat > schemas.Millis(budget)*iv || lat < 0 {
		t.Errorf("detected %v after onset, budget %d intervals", time.Duration(lat)*time.Millisecond, budget)
	}
	if open.Start < onset-2*iv || open.Start > onset+iv {
		t.Errorf("start %s, onset %s", open.Start, onset)
	}
	if open.Subject != portOf("host-a").Subject() || open.Origin == nil || open.Origin.Node != "host-a" || open.Origin.Silent != silent {
		t.Errorf("subject %v origin %+v", open.Subject, open.Origin)
	}
	if open.Layer != schemas.LayerLinkNetwork {
		t.Errorf("layer %s", open.Layer)
	}
	last := r.events[len(r.events)-1]
	var nodes []string
	for i, a := range last.Affected {
		nodes = append(nodes, a.Node)
		if i > 0 && a.FirstSeen < last.Affected[i-1].FirstSeen {
			t.Errorf("affected not in first_seen order: %+v", last.Affected)
		}
		wantHops := 2
		if a.Node == "host-e" {
			wantHops = 4
		}
		if a.Hops != wantHops || a.PauseFraction <= 0 {
			t.Errorf("affected %+v", a)
		}
	}
	if strings.Join(nodes, ",") != strings.Join(affected, ",") {
		t.Errorf("affected %v, want %v", nodes, affected)
	}
	for _, ev := range r.events {
		if ev.ID != open.ID {
			t.Errorf("event of another incident: %s", ev.ID)
		}
	}
}

// Incast: short pause bursts with ECN marks and CNPs, on the receiver and on
// its senders, while a node on the same leaf has a gap. Resets, collector
// restarts, gaps and duplicates on healthy ports. None is a storm.
func TestPFCStormQuiet(t *testing.T) {
	tests := []struct {
		name string
		plan func(string, int) reading
	}{
		{"incast bursts", func(h string, k int) reading {
			rd := healthy()
			burst := k%4 == 1
			switch h {
			case "host-e": // the incast receiver: marks, CNPs, a slow-receiver pause
				if burst {
					rd.tx, rd.ecnPerS, rd.cnpSent, rd.rcvGbps = 0.45, 40000, 15000, 150
				}
				if k == 41 || k == 42 {
					rd.tx, rd.ecnPerS, rd.cnpSent, rd.rcvGbps = 0.6, 60000, 20000, 70
				}
			case "host-b", "host-c", "host-d": // senders paused by the leaf, slowed by CNPs
				if burst || k%4 == 2 {
					rd.rx, rd.cnpHandled = 0.3, 8000
				}
			case "host-a":
				if k >= 30 && k < 34 {
					return reading{skip: true} // a node gap during the bursts
				}
			}
			return rd
		}},
		{"resets, restarts, gaps, duplicates", func(h string, k int) reading {
			rd := healthy()
			switch {
			case h == "host-b" && k == 10:
				rd.reset = true
				rd.tx = 0.9 // counts from zero: not this interval's figure
			case h == "host-c" && k == 12:
				rd.baseline = true // collector restart
				rd.tx = 0.99
			case h == "host-d" && k >= 15 && k < 19:
				return reading{skip: true}
			case h == "host-a" && k >= 20 && k < 23:
				return reading{skip: true}
			}
			return rd
		}},
	}
	for _, tt := range tests {
		for _, iv := range []time.Duration{time.Second, 5 * time.Second} {
			for _, names := range namings {
				t.Run(names.name+"/"+tt.name+"/"+iv.String(), func(t *testing.T) {
					r := newPFCRig(t, iv)
					r.pauseNames = names.counters
					r.run(iv, 80, tt.plan)
					// Duplicates: the same samples again are stale.
					r.run(iv, 3, tt.plan)
					if len(r.events) != 0 {
						t.Errorf("events: %v", summaries(r.events))
					}
				})
			}
		}
	}
}

// A slow receiver that pauses for a long time with congestion-control
// activity is a storm after three intervals, not one.
func TestPFCStormSustainedIncastSignature(t *testing.T) {
	r := newPFCRig(t, time.Second)
	r.run(time.Second, 30, func(h string, k int) reading {
		rd := healthy()
		if h == "host-a" && k >= 10 {
			rd.tx, rd.ecnPerS, rd.cnpSent, rd.rcvGbps = 0.7, 30000, 9000, 50
		}
		return rd
	})
	opens := r.ofType(schemas.StateOpen)
	if len(opens) != 1 || opens[0].DetectedAt < detecttest.T0+12_000 {
		t.Errorf("opens %v", summaries(opens))
	}
}

func TestPFCReadPauses(t *testing.T) {
	r := newPFCRig(t, time.Second)
	s := r.sample(portOf("host-a"), detecttest.T0+1000, 2*time.Second, reading{tx: 0.5, rx: 0.1, rcvGbps: 20, ecnPerS: 100, warn: 1})
	got := pause.Read(s.PortSample)
	if !got.Valid || got.Prio != 3 || got.TxFraction != 0.5 || got.RxFraction != 0.1 || got.StormWarn != 1 ||
		got.Utilisation < 0.099 || got.Utilisation > 0.101 || got.ECNPerS != 100 || got.TxFramesPerS != 6250 {
		t.Errorf("%+v", got)
	}
	for _, name := range []string{"tx_prio8_pause", "tx_prio3_pausex", "rx_prio_pause", "tx_pause_storm_warning_events"} {
		if _, _, _, ok := pause.ParseCounter(name); ok {
			t.Errorf("%s parsed as a pause counter", name)
		}
	}
}

// TestPFCStormLAG: a RoCE LAG's sample sums its member links' pauses. Two
// links pausing 34% each while the host receives almost nothing are no
// storm (read as one link, the 68% sum was one: the altgen bonded sweep's
// false storms); both links pausing 90% are. A lone member stuck at 100%
// beside an idle sibling reads 50%, still a storm.
func TestPFCStormLAG(t *testing.T) {
	tests := []struct {
		name    string
		tx      float64 // each link's (the sum is twice)
		noGauge bool
		storm   bool
		wantTx  float64 // the open event's tx_pause_fraction
	}{
		{"two links pausing 34% each", 0.34, false, false, 0},
		{"two links pausing 90% each", 0.9, false, true, 0.9},
		{"one link stuck, its sibling idle: the mean is 50%", 0.5, false, true, 0.5},
		// Without the gauge (a trace from before it) the sum reads as one
		// link's: what the fix is about.
		{"two links pausing 34% each, no gauge", 0.34, true, true, 0.68},
	}
	for _, tt := range tests {
		for _, names := range namings {
			t.Run(names.name+"/"+tt.name, func(t *testing.T) {
				r := newPFCRig(t, time.Second)
				r.pauseNames = names.counters
				r.run(time.Second, 40, func(h string, k int) reading {
					rd := healthy()
					if h == "host-a" {
						rd.lag, rd.noGauge = 2, tt.noGauge
						if k >= 10 {
							rd.tx, rd.rcvGbps, rd.ecnPerS, rd.cnpSent = tt.tx, 0.2, 0, 0
						}
					}
					return rd
				})
				opens := r.ofType(schemas.StateOpen)
				if !tt.storm {
					if len(r.events) != 0 {
						t.Errorf("events: %v", summaries(r.events))
					}
					return
				}
				if len(opens) != 1 || opens[0].Subject != portOf("host-a").Subject() {
					t.Fatalf("opens %v", summaries(opens))
				}
				ev := opens[0].Evidence
				if ev["tx_pause_fraction"] != tt.wantTx {
					t.Errorf("tx_pause_fraction %v, want %v", ev["tx_pause_fraction"], tt.wantTx)
				}
				if links, ok := ev["lag_members"]; ok == tt.noGauge || !tt.noGauge && links != 2 {
					t.Errorf("lag_members evidence %v, %v", links, ok)
				}
				if !tt.noGauge && !strings.Contains(opens[0].Summary, "mean of its 2 LAG member links") {
					t.Errorf("summary %q does not say the figure is the members' mean", opens[0].Summary)
				}
			})
		}
	}
}

// TestPFCReadPausesLAG: a LAG's figures are per link: durations and frames
// over the member count, in both directions; the gauge alone, not the
// device name, says how many links were summed.
func TestPFCReadPausesLAG(t *testing.T) {
	r := newPFCRig(t, time.Second)
	s := r.sample(portOf("host-a"), detecttest.T0+1000, 2*time.Second, reading{tx: 0.34, rx: 0.1, rcvGbps: 20, lag: 2})
	got := pause.Read(s.PortSample)
	if !got.Valid || got.Links != 2 || got.TxFraction != 0.34 || got.RxFraction != 0.1 || got.TxFramesPerS != 4250 || got.RxFramesPerS != 1250 {
		t.Errorf("%+v", got)
	}
	if f, ok := pause.TxFraction(s.PortSample); !ok || f != 0.34 {
		t.Errorf("pause.TxFraction %v %v, want the mean link's 0.34", f, ok)
	}
	// Four links, summed to 3.6 intervals: each pauses 90%.
	s = r.sample(portOf("host-b"), detecttest.T0+1000, time.Second, reading{tx: 0.9, lag: 4})
	if got := pause.Read(s.PortSample); got.Links != 4 || got.TxFraction != 0.9 {
		t.Errorf("four links: %+v", got)
	}
	s = r.sample(portOf("host-c"), detecttest.T0+1000, time.Second, reading{tx: 0.34, lag: 2, noGauge: true})
	if got := pause.Read(s.PortSample); got.Links != 1 || got.TxFraction != 0.68 {
		t.Errorf("no gauge: %+v", got)
	}
}

func summaries(evs []*schemas.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.State+" "+ev.Subject.String()+" "+ev.DetectedAt.String()+" "+ev.Summary)
	}
	return out
}

// Readings that arrive out of order or span a gap must not invent a second
// storm or a wrong silent origin.
func TestPFCStormLateAndGapReadings(t *testing.T) {
	const iv = 5 * time.Second
	ivMs := schemas.Millis(iv.Milliseconds())
	tests := []struct {
		name string
		// feed drives the rig; it returns nothing, the checks are common.
		feed func(r *rig)
	}{
		{
			// The host hung (silent origin inferred from its victims), the
			// storm ended, and the host came back: its first reading spans
			// the whole silence and averages 60% paused. That is the storm
			// already told, not a new one.
			name: "silent origin's first reading after the silence",
			feed: func(r *rig) {
				plan := stormPlan(20, 40, -1, true, -1)
				for k := range 60 {
					for i, h := range hosts {
						at := detecttest.T0 + schemas.Millis(k)*ivMs + schemas.Millis(i*37)
						rd := plan(h, k)
						if k == 0 {
							rd.baseline = true
						}
						switch {
						case h == "host-a" && k == 46:
							gap := time.Duration(27) * iv
							rd = reading{tx: 0.6, rcvGbps: 1}
							r.feed(r.sample(portOf(h), at, gap, rd))
							continue
						case h == "host-a" && k > 46:
							rd = healthy()
						}
						if rd.skip {
							continue
						}
						r.feed(r.sample(portOf(h), at, iv, rd))
					}
				}
			},
		},
		{
			// host-d has a gap as the storm begins; host-a, the real
			// origin, delivers its lines one interval late. The silent
			// host-d must not be named before host-a's reading arrives.
			name: "late origin lines and a silent neighbour",
			feed: func(r *rig) {
				plan := stormPlan(20, 40, -1, false, -1)
				var late []*processor.Sample
				for k := range 60 {
					for i, h := range hosts {
						at := detecttest.T0 + schemas.Millis(k)*ivMs + schemas.Millis(i*37)
						rd := plan(h, k)
						if k == 0 {
							rd.baseline = true
						}
						if h == "host-d" && k >= 17 && k < 30 {
							continue
						}
						s := r.sample(portOf(h), at, iv, rd)
						if h == "host-d" && k == 30 {
							s = r.sample(portOf(h), at, 14*iv, rd)
						}
						if h == "host-a" && k >= 18 {
							late = append(late, s)
							continue
						}
						r.feed(s)
					}
					// host-a's previous line arrives after everyone's current one.
					for len(late) > 1 {
						r.feed(late[0])
						late = late[1:]
					}
				}
			},
		},
	}
	for _, tt := range tests {
		for _, names := range namings {
			t.Run(names.name+"/"+tt.name, func(t *testing.T) {
				r := newPFCRig(t, iv)
				r.pauseNames = names.counters
				tt.feed(r)
				opens := r.ofType(schemas.StateOpen)
				if len(opens) != 1 {
					t.Fatalf("%d opens, want 1: %v", len(opens), summaries(r.events))
				}
				if opens[0].Subject.Node != "host-a" {
					t.Errorf("origin %v, want host-a", opens[0].Subject)
				}
			})
		}
	}
}

// A hung host with two ports on the paused leaf: both go silent together and
// nothing says which one pauses. The incident names the node, not a guess.
func TestPFCStormSilentTwoPortHostIsNodeScope(t *testing.T) {
	const interval = 2 * time.Second
	r := newPFCRig(t, interval)
	topo, err := schemas.ParseTopology(strings.NewReader(strings.Replace(rigTopo,
		`{"a":"host-a/mlx5_0/1","b":"leaf-01/swp1"},`,
		`{"a":"host-a/mlx5_0/1","b":"leaf-01/swp1"},{"a":"host-a/mlx5_1/1","b":"leaf-01/swp9"},`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	r.topo = topo
	second := schemas.PortID{Node: "host-a", Device: "mlx5_1", Port: 1}
	const from, to, n = 20, 60, 90
	plan := stormPlan(from, to, -1, true, -1)
	for k := range n {
		for i, h := range hosts {
			rd := plan(h, k)
			rd.baseline = k == 0
			if rd.skip {
				continue
			}
			at := detecttest.T0 + schemas.Millis(int64(k)*interval.Milliseconds()+int64(i)*37)
			r.feed(r.sample(portOf(h), at, interval, rd))
			if h == "host-a" {
				r.feed(r.sample(second, at+5, interval, rd))
			}
		}
	}
	opens := r.ofType(schemas.StateOpen)
	if len(opens) != 1 {
		t.Fatalf("%d opens, want 1: %v", len(opens), summaries(r.events))
	}
	open := opens[0]
	if open.Scope != schemas.ScopeNode || open.Subject != (schemas.Subject{Node: "host-a"}) {
		t.Errorf("scope %s subject %v, want node host-a", open.Scope, open.Subject)
	}
	if open.Origin == nil || open.Origin.Node != "host-a" || open.Origin.Device != "" || !open.Origin.Silent {
		t.Errorf("origin %+v, want host-a with no port, silent", open.Origin)
	}
	for _, ev := range r.events {
		if ev.ID != open.ID {
			t.Errorf("a second incident: %s", ev.ID)
		}
	}
}

// TestPFCReadPausesKinds: a reading with only global pause counters is
// valid and names priority -1; the busier of per-priority and global pause
// wins; a pinned 32-bit port_rcv_data is an unknown receive rate, not 0 Gb/s.
func TestPFCReadPausesKinds(t *testing.T) {
	const sat = schemas.FlagSaturated
	tests := []struct {
		name      string
		cs        []schemas.CounterDelta
		valid     bool
		prio      int
		tx, rx    float64
		rcvKnown  bool
		rcvGbps   float64
		utilKnown bool
	}{
		{"mlx5 global pause only", []schemas.CounterDelta{
			detecttest.Eth("tx_global_pause_duration", 9, 1_800_000, 0), detecttest.Eth("tx_global_pause", 9, 22_500, 0),
			detecttest.Eth("rx_global_pause_duration", 9, 20_000, 0), detecttest.Eth("rx_global_pause", 9, 250, 0),
			detecttest.Ctr("port_rcv_data", 9, 50_000_000, 0)}, true, pause.GlobalPrio, 0.9, 0.01, true, 0.2, true},
		{"mlx4_en global pause only", []schemas.CounterDelta{
			detecttest.Eth("tx_pause_duration", 9, 1_000_000, 0), detecttest.Eth("rx_pause_duration", 9, 0, 0)}, true, pause.GlobalPrio, 0.5, 0, false, 0, false},
		{"per priority busier than the global pause", []schemas.CounterDelta{
			detecttest.Eth("tx_prio3_pause_duration", 9, 1_200_000, 0), detecttest.Eth("tx_global_pause_duration", 9, 200_000, 0)}, true, 3, 0.6, 0, false, 0, false},
		{"a held global pause counter: no reading", []schemas.CounterDelta{
			detecttest.Eth("tx_global_pause_duration", 0, 0, schemas.FlagHeld), detecttest.Eth("rx_global_pause_duration", 9, 0, 0)}, false, 0, 0, 0, false, 0, false},
		{"pinned port_rcv_data: receive rate unknown", []schemas.CounterDelta{
			detecttest.Eth("tx_global_pause_duration", 9, 1_800_000, 0), detecttest.Ctr("port_rcv_data", 1<<32-1, 0, sat)}, true, pause.GlobalPrio, 0.9, 0, false, 0, false},
		{"no pause counter: no reading", []schemas.CounterDelta{detecttest.Ctr("port_rcv_data", 9, 50_000_000, 0)}, false, 0, 0, 0, true, 0.2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &processor.Sample{ID: detecttest.PortA, Time: detecttest.At(2), PortSample: &schemas.PortSample{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet",
				State: "ACTIVE", Rate: "100 Gb/sec (4X EDR)", TimeMs: int64(detecttest.At(2)), IntervalMs: 2000, Counters: tt.cs}}
			got := pause.Read(s.PortSample)
			if got.Valid != tt.valid {
				t.Fatalf("valid %v, want %v: %+v", got.Valid, tt.valid, got)
			}
			if !tt.valid {
				return
			}
			if got.Prio != tt.prio || got.TxFraction != tt.tx || got.RxFraction != tt.rx || got.RcvKnown != tt.rcvKnown ||
				got.RcvGbps != tt.rcvGbps || (got.Utilisation >= 0) != tt.utilKnown {
				t.Errorf("%+v", got)
			}
			if f, ok := pause.TxFraction(s.PortSample); !ok || f != tt.tx {
				t.Errorf("pause.TxFraction %v %v", f, ok)
			}
		})
	}
}

func TestPFCRound2(t *testing.T) {
	if got := round2(0.255); got != 0.26 {
		t.Errorf("round2(0.255) = %v, want 0.26", got)
	}
}
