package processor

import (
	"context"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/processor/stats"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// judged is the engine under the transport and application detectors
// (retransmissions, receive_starvation, completion_errors): a handful of
// error counters of a port, summed into one figure per sample and judged
// against the port's own history and the fabric's ports, with a sustain
// requirement and the incident lifecycle for hysteresis.
//
// Counters come in two roles. Primary counters are counted by the port the
// fault is on (out_of_sequence on the receiver whose link loses packets,
// out_of_buffer on the receiver that does not drain its queue): they make
// the port the subject. Secondary counters are counted by the peers of that
// port (packet_seq_err on the senders that get its NAKs, rnr_nak_retry_err
// on the senders it refuses): their rise is evidence of the same incident,
// and makes a port a subject of its own only when no port of the fabric
// shows primary excess (the faulty port is not monitored).
type judged struct {
	typ, layer string
	primary    []judgedCounter
	secondary  []judgedCounter
	// evidenceOnly counters are reported, never judged (flush errors
	// follow other errors).
	evidenceOnly []judgedCounter

	// perPacket judges the primary count per received packet
	// (port_rcv_packets): reordering and loss scale with traffic, so a
	// job starting on a port with healthy reordering is not an incident.
	perPacket bool
	// loss replaces factor and floor for the primary counters by the
	// statistical loss test of retransmissions (lossJudge): against the
	// port's quiet history, with a minimum effect in lost packets.
	loss bool
	// group makes one incident of the ports whose errors are one fault's
	// (completion_errors: a requester and its responders; see groupHold).
	group   bool
	members map[schemas.Subject]*groupMember
	// factor and floor: a sample is in excess when its figure is above
	// factor x reference + floor (reference: the larger of the port's own
	// baseline and the fabric's median baseline).
	factor, floor float64
	// minRate is the least excess count per second that can be an
	// incident, whatever the ratio (a few events on an idle port are not).
	minRate float64
	// secFloor is the floor of the secondary figure (per transmitted
	// packet with perPacket: NAKs answer what a port sends; else per
	// second).
	// secondaryRun is how many excess samples in a row a secondary-only
	// port needs, and quietFor how long no port may have shown primary
	// excess, before the secondary port becomes a subject itself.
	secFloor     float64
	secondaryRun int
	quietFor     time.Duration
	// warm is how many samples build the baseline before it counts.
	warm int
	// baseSpan is the data time the baseline averages over.
	baseSpan time.Duration
	policy   Policy

	// veto, if set, keeps a pending incident from holding on this sample
	// (receive_starvation: drops that begin with the port's own pause
	// storm are that storm's, not an incident of their own).
	veto func(s *Sample) bool

	// tunables are the detector's exported settings (from a configuration
	// file after NewDetectors), taken in before the first sample.
	tunables *JudgedTunables

	// describe writes the summary, evidence additions, severity and checks.
	describe func(j *judged, s *Sample, st *judgedPort, secondaryOnly bool) (summary, severity string, checks []schemas.Check)

	tracker     *Tracker
	fabric      FabricView
	peerRef     float64        // the fabric's median warm baseline
	nextPeer    schemas.Millis // when to recompute peerRef
	lastPrimary schemas.Millis // latest primary excess anywhere
	// peers are the ports with secondary excess lately: evidence of the
	// open incidents. Bounded by the number of ports with the fault.
	peers map[schemas.Subject]schemas.Millis
}

type judgedCounter struct {
	id   schemas.CounterID
	name string
}

func jc(src schemas.Source, names ...string) []judgedCounter {
	out := make([]judgedCounter, len(names))
	for i, n := range names {
		out[i] = judgedCounter{id: schemas.MustCounterID(src, n), name: n}
	}
	return out
}

// JudgedTunables are the settings every judged detector shares (in the
// configuration file: factor, floor, min_rate, open_after,
// open_after_samples, resolve_after). Factor and Floor: a sample is in
// excess above Factor x the port's (or the fabric's) usual figure + Floor;
// MinRate is the least excess count per second. OpenAfter and
// OpenAfterSamples: how long and how many samples in a row the excess must
// hold; ResolveAfter: how long clear to resolve. What the figure is, is the
// detector's own (its type's comment says).
type JudgedTunables struct {
	Factor, Floor, MinRate float64
	OpenAfter              time.Duration
	OpenAfterSamples       int
	ResolveAfter           time.Duration
}

// exportTunables shows the defaults in t and keeps t to take in later.
func (j *judged) exportTunables(t *JudgedTunables) {
	*t = JudgedTunables{j.factor, j.floor, j.minRate, j.policy.OpenAfter, j.policy.OpenAfterSamples, j.policy.ResolveAfter}
	j.tunables = t
}

// adopt takes the exported tunables in.
func (j *judged) adopt() {
	t := j.tunables
	j.factor, j.floor, j.minRate = t.Factor, t.Floor, t.MinRate
	j.policy.OpenAfter, j.policy.OpenAfterSamples, j.policy.ResolveAfter = t.OpenAfter, t.OpenAfterSamples, t.ResolveAfter
}

// judgedMax bounds the counters of one detector (primary + secondary +
// evidence only): the per-port state keeps fixed arrays. A detector lists
// mlx5's and mlx4's counters side by side (completion_errors: 27), and a
// port only keeps state once one of them moved.
const judgedMax = 32

const (
	// judgedPeerRefreshMs: the fabric's median baseline is recomputed once a
	// minute of data time, not at every sample: it moves slowly, and sorting
	// every port's baseline per sample would cost more than the detector.
	judgedPeerRefreshMs = 60_000
	// judgedPeerForgetMs: a port with no secondary excess for 10 minutes
	// leaves the peer list, which would otherwise grow with every port that
	// ever saw one.
	judgedPeerForgetMs = 10 * 60_000
	// judgedPeerRecentMs: a finding names the peers with secondary excess in
	// the last two minutes, the senders that see this port's fault now.
	judgedPeerRecentMs = 120_000
	// judgedProgressFactor: an open incident is announced again when its
	// peak reaches 1.5 times what was last told; smaller rises would flood
	// the events stream with updates that say nothing new.
	judgedProgressFactor = 1.5
	// judgedPeerP, judgedPeerMinCount and judgedPeerMinExpect: a sender
	// is a peer of a loss (evidence only) when its NAKs of one sample
	// have a Poisson p-value of at most 1e-4 against its usual, are at
	// least 3, and the usual is taken as at least 0.02 a sample (a port
	// that never NAKed is not a peer for its first one).
	judgedPeerP         = 1e-4
	judgedPeerMinCount  = 3
	judgedPeerMinExpect = 0.02
)

// judgedPort is a port's state: a few numbers, created on the first sample
// that shows any of the counters (healthy quiet ports keep nothing).
type judgedPort struct {
	base      float64 // the port's usual figure (EWMA of clipped samples)
	secBase   float64 // the same for the secondary counters
	baseN     int
	run       int            // excess samples in a row
	secRun    int            // secondary excess samples in a row
	since     schemas.Millis // onset of the current run
	figure    float64        // latest figure (ratio or rate)
	primRate  float64        // latest primary count per second
	peak      float64
	rates     [judgedMax]float32 // latest per-counter rates, per second
	total     [judgedMax]uint64  // counts since the onset
	packetsPS float64
	told      float64 // peak last told in an update
	// loss is the loss test's state (retransmissions only).
	loss *lossPort
}

func (j *judged) Name() string { return j.typ }

func (j *judged) Init(fabric FabricView) error {
	j.fabric = fabric
	return nil
}

func (j *judged) track() *Tracker {
	if j.tracker == nil {
		if j.tunables != nil {
			j.adopt()
		}
		j.tracker = NewTracker(j.typ, j.policy)
	}
	return j.tracker
}

func (j *judged) counters() []judgedCounter {
	out := make([]judgedCounter, 0, len(j.primary)+len(j.secondary)+len(j.evidenceOnly))
	out = append(out, j.primary...)
	out = append(out, j.secondary...)
	return append(out, j.evidenceOnly...)
}

// read returns the sample's primary and secondary counts, whether the
// sample can be judged (a baseline, a reset or a held reading carries no
// usable delta), and whether any counter moved.
func (j *judged) read(s *Sample, st *judgedPort) (prim, sec float64, ok bool) {
	if s.IntervalMs <= 0 || s.AnyFlags()&(schemas.FlagFirst|schemas.FlagReset) != 0 {
		return 0, 0, false
	}
	secs := float64(s.IntervalMs) / 1000
	i := 0
	for role, set := range [3][]judgedCounter{j.primary, j.secondary, j.evidenceOnly} {
		for _, c := range set {
			d, ok := s.CounterByID(c.id)
			var v float64
			if ok && d.Flags&schemas.FlagHeld == 0 {
				v = float64(d.Delta)
			}
			if st != nil {
				st.rates[i] = float32(v / secs)
				st.total[i] += uint64(v)
			}
			switch role {
			case 0:
				prim += v
			case 1:
				sec += v
			}
			i++
		}
	}
	return prim, sec, true
}

// moved reports whether any watched counter has a delta: ports that never
// see one keep no state.
func (j *judged) moved(s *Sample) bool {
	for _, set := range [3][]judgedCounter{j.primary, j.secondary, j.evidenceOnly} {
		for _, c := range set {
			if d, ok := s.CounterByID(c.id); ok && d.Delta > 0 {
				return true
			}
		}
	}
	return false
}

func (j *judged) OnSample(_ context.Context, port *PortState, s *Sample, em Emitter) {
	t := j.track()
	subject := s.ID.Subject()
	st, have := LookupPortLocal[judgedPort](port, j.typ)
	if !have {
		if !j.moved(s) {
			return
		}
		st = PortLocal[judgedPort](port, j.typ)
		// Every sample before this one was quiet: a baseline of zero.
		st.baseN = int(min(port.Samples, uint64(j.warm)))
	}
	prim, sec, ok := j.read(s, nil)
	if !ok {
		return
	}
	// A sample whose deltas span a gap (the port or its node was silent
	// for minutes) averages over a time in which anything may have
	// happened: a burst of seconds inside it reads as a rate held for
	// minutes. It neither starts nor advances an incident, nor teaches
	// the baseline; an open one stays as it is until the next reading,
	// one interval later, says whether the excess goes on.
	if judgedSpansGap(port, s) {
		if !t.IsOpen(subject) {
			st.run, st.secRun = 0, 0
			t.Clear(s.Time, subject, "", nil, em)
		}
		return
	}
	v, ok := j.judge(s, st, prim, sec)
	if !ok {
		return
	}
	if j.loss {
		pk, _ := s.CounterByID(idPortRcvPackets)
		v.primExcess = j.lossJudge(port, s, st, prim, float64(pk.Delta), t.IsOpen(subject), em)
	}
	figure, primRate, secRate := v.figure, v.primRate, v.secRate
	primExcess, secExcess := v.primExcess, v.secExcess
	if j.loss && !secExcess && sec >= judgedPeerMinCount && st.baseN >= j.warm {
		// A sender whose NAKs rise above its own usual, if too little to
		// judge it a subject, is evidence of a lossy receiver: the loss
		// test finds losses of 1e-6, whose NAKs are a few a second.
		xp, _ := s.CounterByID(idPortXmitPackets)
		if stats.PoissonTail(sec, math.Max(st.secBase*float64(xp.Delta), judgedPeerMinExpect)) <= judgedPeerP {
			if j.peers == nil {
				j.peers = map[schemas.Subject]schemas.Millis{}
			}
			j.peers[subject] = s.Time
		}
	}

	if primExcess || secExcess || t.IsOpen(subject) || st.run > 0 {
		// Keep the per-counter figures of a port worth telling about.
		if st.run == 0 && (primExcess || secExcess) {
			clear(st.total[:])
		}
		j.read(s, st)
	}
	st.figure, st.primRate = figure, primRate

	if primExcess && j.veto != nil && !t.IsOpen(subject) && j.veto(s) {
		st.run = 0
		t.Clear(s.Time, subject, "", nil, em)
		return
	}
	if primExcess {
		j.lastPrimary = max(j.lastPrimary, s.Time)
		if st.run == 0 {
			st.since, st.peak, st.told = s.Since(), 0, 0
		}
		st.run++
		st.secRun = 0
		st.peak = math.Max(st.peak, figure)
		if j.group {
			j.groupHold(s, st, em)
			return
		}
		t.Hold(s.Time, j.finding(s, st, false), em)
		return
	}
	if secExcess {
		if j.peers == nil {
			j.peers = map[schemas.Subject]schemas.Millis{}
		}
		j.peers[subject] = s.Time
		st.secRun++
		quiet := j.lastPrimary == 0 || s.Time-j.lastPrimary > millis(j.quietFor)
		if t.IsOpen(subject) || (quiet && st.secRun >= j.secondaryRun) {
			if st.run == 0 {
				st.since, st.peak, st.told = s.Since(), 0, 0
			}
			st.run++
			st.peak = math.Max(st.peak, secRate)
			t.Hold(s.Time, j.finding(s, st, true), em)
			return
		}
	} else {
		st.secRun = 0
	}
	st.run = 0
	j.learn(st, v)
	t.Clear(s.Time, subject, "the counters are back to the port's usual level", map[string]any{"figure_now": sig(figure)}, em)
}

// learn moves the port's baselines toward a sample that is not in excess,
// clipped at the limit so a fault that creeps in does not teach them.
func (j *judged) learn(st *judgedPort, v verdict) {
	n := st.baseN + 1
	alpha := 1 / float64(n)
	if span := j.baseSpan.Seconds(); n > j.warm && span > 0 {
		alpha = math.Min(1, v.secs/span)
	}
	st.base += alpha * (math.Min(v.figure, v.limit) - st.base)
	st.secBase += alpha * (math.Min(v.secFigure, v.secLimit) - st.secBase)
	st.baseN = min(n, 1<<30)
}

// verdict is what one sample says against the port's baselines.
type verdict struct {
	secs                         float64
	figure, primRate, limit      float64
	secRate, secFigure, secLimit float64
	primExcess, secExcess        bool
}

// judge weighs a sample's primary and secondary counts (prim, sec) against
// the port's own baselines and the peers' reference; ok is false when the
// sample cannot be judged (no packet count to share against, or counters
// that do not count the same packets).
func (j *judged) judge(s *Sample, st *judgedPort, prim, sec float64) (v verdict, ok bool) {
	secs := float64(s.IntervalMs) / 1000
	figure := prim / secs
	if j.perPacket {
		pk, okp := s.CounterByID(idPortRcvPackets)
		// No denominator, not judged: a held misread, a baseline or a reset
		// says nothing about the interval, and a 32-bit counter pinned at
		// its top (mlx4 without extended counters) counts no packets any
		// more, which would make every out-of-sequence packet a share of 1.
		if !okp || !schemas.Usable(pk) || pk.Flags&schemas.FlagSaturated != 0 {
			return v, false
		}
		st.packetsPS = float64(pk.Delta) / secs
		if prim > float64(pk.Delta) && pk.Delta > 0 {
			// More out-of-sequence packets than packets received: the two
			// counters do not count the same thing on this port (or one
			// of them is off), and the share means nothing.
			return v, false
		}
		figure = prim / math.Max(float64(pk.Delta), 1)
	}
	ref := st.base
	if st.baseN < j.warm {
		ref = 0
	}
	ref = math.Max(ref, j.peerRef)
	limit := j.factor*ref + j.floor
	primRate := prim / secs
	excessRate := primRate
	if j.perPacket {
		excessRate = (figure - ref) * st.packetsPS
	}
	// A port is judged against its own history once it has one: a port
	// with high but healthy reordering is not an incident while it starts.
	primExcess := st.baseN >= j.warm && figure > limit && excessRate >= j.minRate

	secRate := sec / secs
	secFigure := secRate
	if j.perPacket {
		xp, _ := s.CounterByID(idPortXmitPackets)
		secFigure = sec / math.Max(float64(xp.Delta), 1)
	}
	secRef := 0.0
	if st.baseN >= j.warm {
		secRef = st.secBase
	}
	secLimit := j.factor*secRef + j.secFloor
	secExcess := len(j.secondary) > 0 && st.baseN >= j.warm && secRate >= j.minRate && secFigure > secLimit

	return verdict{secs: secs, figure: figure, primRate: primRate, limit: limit,
		secRate: secRate, secFigure: secFigure, secLimit: secLimit, primExcess: primExcess, secExcess: secExcess}, true
}

// judgedSpansGap reports whether the sample's interval is over two and a
// half of the port's usual ones (plus a second of read jitter).
func judgedSpansGap(port *PortState, s *Sample) bool {
	usual := port.LastIntervalMs
	return usual > 0 && s.IntervalMs > usual*5/2+1000
}

// OnWatermark recomputes the fabric's median baseline once a minute and
// resolves incidents of silent ports.
func (j *judged) OnWatermark(_ context.Context, fabric FabricView, wm schemas.Millis, em Emitter) {
	if wm >= j.nextPeer {
		j.nextPeer = wm + judgedPeerRefreshMs
		var bases []float64
		fabric.Ports(func(p *PortState) bool {
			if st, ok := LookupPortLocal[judgedPort](p, j.typ); ok && st.baseN >= j.warm {
				bases = append(bases, st.base)
			}
			return true
		})
		j.peerRef = 0
		if len(bases) >= 3 {
			sort.Float64s(bases)
			j.peerRef = bases[len(bases)/2]
		}
		for s, seen := range j.peers {
			if wm-seen > judgedPeerForgetMs {
				delete(j.peers, s)
			}
		}
		for s, m := range j.members {
			if wm-m.last > judgedPeerForgetMs && !j.track().IsOpen(s) && !j.leadsOpen(s) {
				delete(j.members, s)
			}
		}
	}
	j.track().Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
}

func (j *judged) finding(s *Sample, st *judgedPort, secondaryOnly bool) Finding {
	summary, severity, checks := j.describe(j, s, st, secondaryOnly)
	progress := st.peak >= judgedProgressFactor*st.told && st.peak > 0
	if progress {
		st.told = st.peak
	}
	rates := map[string]any{}
	totals := map[string]any{}
	for i, c := range j.counters() {
		if st.rates[i] > 0 {
			rates[c.name] = sig(float64(st.rates[i]))
		}
		if st.total[i] > 0 {
			totals[c.name] = st.total[i]
		}
	}
	ev := map[string]any{
		"rates_per_s":        rates,
		"counts_since_onset": totals,
		"excess_since":       st.since.String(),
		"interval_s":         float64(s.IntervalMs) / 1000,
		"baseline":           sig(st.base),
		"fabric_baseline":    sig(j.peerRef),
		"figure":             sig(st.figure),
		"peak":               sig(st.peak),
		"secondary_only":     secondaryOnly,
	}
	if j.perPacket {
		ev["per_received_packet"] = sig(st.figure)
		ev["received_packets_per_s"] = sig(st.packetsPS)
	}
	if lp := st.loss; lp != nil && !secondaryOnly {
		// The loss test's figures (retransmissions.go): the last two
		// minutes against the port's quiet history.
		ev["baseline"] = sig(lp.base)
		ev["window_s"] = float64(lossWindowMs) / 1000
		ev["p_value"] = sig(lp.p)
		ev["dispersion"] = sig(lp.phi)
		ev["excess_per_received_packet"] = sig(lp.excess)
		ev["oos_per_loss"] = sig(lp.factor)
		ev["lost_per_received_packet"] = sig(lp.lost)
		ev["lost_per_s"] = sig(lp.lostPerS)
		ev["loss_explained_by_link"] = lp.explained
	}
	if peers := j.peerNames(s.ID.Subject(), s.Time); len(peers) > 0 {
		ev["peers"] = peers
	}
	return Finding{
		Subject:  s.ID.Subject(),
		Onset:    st.since,
		Severity: severity,
		Layer:    j.layer,
		Summary:  summary,
		Evidence: ev,
		Checks:   checks,
		// Worth an update (at most one per MinUpdateInterval) when the
		// peak grew by half since the last one told.
		Progress: progress,
	}
}

// peerNames lists (at most 8, sorted) the other ports with secondary excess
// in the last two minutes: the senders that see this port's fault.
func (j *judged) peerNames(self schemas.Subject, now schemas.Millis) []string {
	var out []string
	for s, seen := range j.peers {
		if s != self && now-seen <= judgedPeerRecentMs {
			out = append(out, s.String())
		}
	}
	sort.Strings(out)
	if len(out) > 8 {
		out = out[:8]
	}
	return out
}

// rateOf is the latest rate of the named counter.
func (j *judged) rateOf(st *judgedPort, name string) float64 {
	for i, c := range j.counters() {
		if c.name == name {
			return float64(st.rates[i])
		}
	}
	return 0
}

// sig rounds to 3 significant digits for evidence.
func sig(v float64) float64 { return SigDigits(v, 3) }

func trimf(v float64) string { return strconv.FormatFloat(sig(v), 'f', -1, 64) }

// idPortRcvPackets is the denominator of the per-packet figures.
var (
	idPortRcvPackets  = schemas.MustCounterID(schemas.SourceCounters, "port_rcv_packets")
	idPortXmitPackets = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_packets")
)
