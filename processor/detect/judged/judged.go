// Package judged is the engine of the detectors that judge a port's error
// counters against its own history and the fabric's (Engine): the
// transport and application detectors retransmissions, receive_starvation
// and completion_errors, each in a package of its own. It also holds the
// table of the ConnectX-3 (mlx4) counters they read (counterids_mlx4.go).
package judged

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/stats"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Engine is the engine under the transport and application detectors
// (processor/detect/retransmissions, receivestarvation, completionerrors):
// a handful of error counters of a port, summed into one figure per sample
// and judged against the port's own history and the fabric's ports, with a
// sustain requirement and the incident lifecycle for hysteresis. A detector
// sets the exported fields (its counters, figure and defaults) and embeds a
// pointer to it; Tunables are the settings it exports.
//
// Counters come in two roles. Primary counters are counted by the port the
// fault is on (out_of_sequence on the receiver whose link loses packets,
// out_of_buffer on the receiver that does not drain its queue): they make
// the port the subject. Secondary counters are counted by the peers of that
// port (packet_seq_err on the senders that get its NAKs, rnr_nak_retry_err
// on the senders it refuses): their rise is evidence of the same incident,
// and makes a port a subject of its own only when no port of the fabric
// shows primary excess (the faulty port is not monitored).
type Engine struct {
	// Type is the event type (the detector's name) and Layer its layer.
	Type, Layer string
	// Primary and Secondary are the counters of the two roles (above).
	Primary   []Counter
	Secondary []Counter
	// EvidenceOnly counters are reported, never judged (flush errors
	// follow other errors).
	EvidenceOnly []Counter

	// PerPacket judges the primary count per received packet
	// (port_rcv_packets): reordering and loss scale with traffic, so a
	// job starting on a port with healthy reordering is not an incident.
	PerPacket bool
	// Loss, if set, replaces Factor and Floor for the primary counters by
	// the detector's own test (retransmissions' statistical loss test:
	// against the port's quiet history, with a minimum effect in lost
	// packets). It judges the sample's primary count k over n received
	// packets, keeps its state in the port's Loss, and says whether the port
	// holds (an incident opens or stays open on it).
	Loss func(port *processor.PortState, s *processor.Sample, st *Port, k, n float64, open bool, em processor.Emitter) bool
	// LossEvidence, if set, adds the test's figures to the evidence of a
	// finding (not of a secondary-only subject).
	LossEvidence func(st *Port, ev map[string]any)
	// Group makes one incident of the ports whose errors are one fault's
	// (completion_errors: a requester and its responders; see groupHold).
	Group   bool
	members map[schemas.Subject]*groupMember
	// Factor and Floor: a sample is in excess when its figure is above
	// Factor x reference + Floor (reference: the larger of the port's own
	// baseline and the fabric's median baseline).
	Factor, Floor float64
	// MinRate is the least excess count per second that can be an
	// incident, whatever the ratio (a few events on an idle port are not).
	MinRate float64
	// SecFloor is the floor of the secondary figure (per transmitted
	// packet with perPacket: NAKs answer what a port sends; else per
	// second).
	// secondaryRun is how many excess samples in a row a secondary-only
	// port needs, and quietFor how long no port may have shown primary
	// excess, before the secondary port becomes a subject itself.
	SecFloor     float64
	SecondaryRun int
	QuietFor     time.Duration
	// Warm is how many samples build the baseline before it counts.
	Warm int
	// BaseSpan is the data time the baseline averages over.
	BaseSpan time.Duration
	Policy   processor.Policy

	// Veto, if set, keeps a pending incident from holding on this sample
	// (receive_starvation: drops that begin with the port's own pause
	// storm are that storm's, not an incident of their own).
	Veto func(s *processor.Sample) bool

	// tunables are the detector's exported settings (from a configuration
	// file after NewDetectors), taken in before the first sample.
	tunables *Tunables

	// Describe writes the summary, evidence additions, severity and checks.
	Describe func(j *Engine, s *processor.Sample, st *Port, secondaryOnly bool) (summary, severity string, checks []schemas.Check)

	tracker     *processor.Tracker
	fabric      processor.FabricView
	peerRef     float64        // the fabric's median warm baseline
	nextPeer    schemas.Millis // when to recompute peerRef
	lastPrimary schemas.Millis // latest primary excess anywhere
	// peers are the ports with secondary excess lately: evidence of the
	// open incidents. Bounded by the number of ports with the fault.
	peers map[schemas.Subject]schemas.Millis
}

// Counter is one counter the engine reads, resolved once.
type Counter struct {
	ID   schemas.CounterID
	Name string
}

// Counters resolves the named counters of one source.
func Counters(src schemas.Source, names ...string) []Counter {
	out := make([]Counter, len(names))
	for i, n := range names {
		out[i] = Counter{ID: schemas.MustCounterID(src, n), Name: n}
	}
	return out
}

// Tunables are the settings every judged detector shares (in the
// configuration file: factor, floor, min_rate, open_after,
// open_after_samples, resolve_after). Factor and Floor: a sample is in
// excess above Factor x the port's (or the fabric's) usual figure + Floor;
// MinRate is the least excess count per second. OpenAfter and
// OpenAfterSamples: how long and how many samples in a row the excess must
// hold; ResolveAfter: how long clear to resolve. What the figure is, is the
// detector's own (its type's comment says).
type Tunables struct {
	Factor, Floor, MinRate float64
	OpenAfter              time.Duration
	OpenAfterSamples       int
	ResolveAfter           time.Duration
}

// ExportTunables shows the defaults in t and keeps t to take in later.
func (j *Engine) ExportTunables(t *Tunables) {
	*t = Tunables{j.Factor, j.Floor, j.MinRate, j.Policy.OpenAfter, j.Policy.OpenAfterSamples, j.Policy.ResolveAfter}
	j.tunables = t
}

// adopt takes the exported tunables in.
func (j *Engine) adopt() {
	t := j.tunables
	j.Factor, j.Floor, j.MinRate = t.Factor, t.Floor, t.MinRate
	j.Policy.OpenAfter, j.Policy.OpenAfterSamples, j.Policy.ResolveAfter = t.OpenAfter, t.OpenAfterSamples, t.ResolveAfter
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

// Port is a port's state: a few numbers, created on the first sample
// that shows any of the counters (healthy quiet ports keep nothing).
type Port struct {
	Base      float64 // the port's usual figure (EWMA of clipped samples)
	secBase   float64 // the same for the secondary counters
	baseN     int
	run       int            // excess samples in a row
	secRun    int            // secondary excess samples in a row
	Since     schemas.Millis // onset of the current run
	Figure    float64        // latest figure (ratio or rate)
	PrimRate  float64        // latest primary count per second
	Peak      float64
	rates     [judgedMax]float32 // latest per-counter rates, per second
	total     [judgedMax]uint64  // counts since the onset
	packetsPS float64
	told      float64 // peak last told in an update
	// Loss is the state of the detector's own loss test (Loss), nil
	// without one.
	Loss any
}

// Name implements processor.Detector: the event type.
func (j *Engine) Name() string { return j.Type }

// Fabric is the processor's view of the fabric (nil before Init): its
// topology names the switch side of a port's link.
func (j *Engine) Fabric() processor.FabricView { return j.fabric }

// PeerRef is the fabric's median warm baseline of the figure, recomputed
// once a minute of data time.
func (j *Engine) PeerRef() float64 { return j.peerRef }

// Init implements processor.Initializer.
func (j *Engine) Init(fabric processor.FabricView) error {
	j.fabric = fabric
	return nil
}

func (j *Engine) track() *processor.Tracker {
	if j.tracker == nil {
		if j.tunables != nil {
			j.adopt()
		}
		j.tracker = processor.NewTracker(j.Type, j.Policy)
	}
	return j.tracker
}

func (j *Engine) counters() []Counter {
	out := make([]Counter, 0, len(j.Primary)+len(j.Secondary)+len(j.EvidenceOnly))
	out = append(out, j.Primary...)
	out = append(out, j.Secondary...)
	return append(out, j.EvidenceOnly...)
}

// read returns the sample's primary and secondary counts, whether the
// sample can be judged (a baseline, a reset or a held reading carries no
// usable delta), and whether any counter moved.
func (j *Engine) read(s *processor.Sample, st *Port) (prim, sec float64, ok bool) {
	if s.IntervalMs <= 0 || s.AnyFlags()&(schemas.FlagFirst|schemas.FlagReset) != 0 {
		return 0, 0, false
	}
	secs := float64(s.IntervalMs) / 1000
	i := 0
	for role, set := range [3][]Counter{j.Primary, j.Secondary, j.EvidenceOnly} {
		for _, c := range set {
			d, ok := s.CounterByID(c.ID)
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
func (j *Engine) moved(s *processor.Sample) bool {
	for _, set := range [3][]Counter{j.Primary, j.Secondary, j.EvidenceOnly} {
		for _, c := range set {
			if d, ok := s.CounterByID(c.ID); ok && d.Delta > 0 {
				return true
			}
		}
	}
	return false
}

// OnSample implements processor.PortDetector.
func (j *Engine) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	t := j.track()
	subject := s.ID.Subject()
	st := j.portState(port, s)
	if st == nil {
		return
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
	if j.Loss != nil {
		pk, _ := s.CounterByID(idPortRcvPackets)
		v.primExcess = j.Loss(port, s, st, prim, float64(pk.Delta), t.IsOpen(subject), em)
	}
	j.notePeerOfLoss(s, st, sec, v.secExcess)

	if v.primExcess || v.secExcess || t.IsOpen(subject) || st.run > 0 {
		// Keep the per-counter figures of a port worth telling about.
		if st.run == 0 && (v.primExcess || v.secExcess) {
			clear(st.total[:])
		}
		j.read(s, st)
	}
	st.Figure, st.PrimRate = v.figure, v.primRate

	if v.primExcess {
		j.onPrimaryExcess(t, s, st, v.figure, em)
		return
	}
	if v.secExcess {
		if j.onSecondaryExcess(t, s, st, v.secRate, em) {
			return
		}
	} else {
		st.secRun = 0
	}
	st.run = 0
	j.learn(st, v)
	t.Clear(s.Time, subject, "the counters are back to the port's usual level", map[string]any{"figure_now": sig(v.figure)}, em)
}

// portState is the port's state, created on the first sample in which a
// watched counter moves; nil while none has (quiet ports keep nothing).
func (j *Engine) portState(port *processor.PortState, s *processor.Sample) *Port {
	st, have := processor.LookupPortLocal[Port](port, j.Type)
	if !have {
		if !j.moved(s) {
			return nil
		}
		st = processor.PortLocal[Port](port, j.Type)
		// Every sample before this one was quiet: a baseline of zero.
		st.baseN = int(min(port.Samples, uint64(j.Warm)))
	}
	return st
}

// markPeer notes the port as a peer with secondary excess now.
func (j *Engine) markPeer(subject schemas.Subject, at schemas.Millis) {
	if j.peers == nil {
		j.peers = map[schemas.Subject]schemas.Millis{}
	}
	j.peers[subject] = at
}

// notePeerOfLoss marks a sender as a peer of a loss (with a Loss test
// only): its NAKs rise above its own usual, if too little to judge it a
// subject, are evidence of a lossy receiver, since the loss test finds
// losses of 1e-6, whose NAKs are a few a second.
func (j *Engine) notePeerOfLoss(s *processor.Sample, st *Port, sec float64, secExcess bool) {
	if j.Loss != nil && !secExcess && sec >= judgedPeerMinCount && st.baseN >= j.Warm {
		xp, _ := s.CounterByID(idPortXmitPackets)
		if stats.PoissonTail(sec, math.Max(st.secBase*float64(xp.Delta), judgedPeerMinExpect)) <= judgedPeerP {
			j.markPeer(s.ID.Subject(), s.Time)
		}
	}
}

// onPrimaryExcess advances the port's run on a sample with primary excess
// and holds its incident (or its group's), unless the detector's Veto
// keeps a pending one from holding.
func (j *Engine) onPrimaryExcess(t *processor.Tracker, s *processor.Sample, st *Port, figure float64, em processor.Emitter) {
	subject := s.ID.Subject()
	if j.Veto != nil && !t.IsOpen(subject) && j.Veto(s) {
		st.run = 0
		t.Clear(s.Time, subject, "", nil, em)
		return
	}
	j.lastPrimary = max(j.lastPrimary, s.Time)
	if st.run == 0 {
		st.Since, st.Peak, st.told = s.Since(), 0, 0
	}
	st.run++
	st.secRun = 0
	st.Peak = math.Max(st.Peak, figure)
	if j.Group {
		j.groupHold(s, st, em)
		return
	}
	t.Hold(s.Time, j.finding(s, st, false), em)
}

// onSecondaryExcess records a sample with secondary excess only: the port
// is a peer, and becomes a subject of its own (true: held) when it already
// is one, or after SecondaryRun such samples with no primary excess
// anywhere for QuietFor (the faulty port is not monitored).
func (j *Engine) onSecondaryExcess(t *processor.Tracker, s *processor.Sample, st *Port, secRate float64, em processor.Emitter) bool {
	subject := s.ID.Subject()
	j.markPeer(subject, s.Time)
	st.secRun++
	quiet := j.lastPrimary == 0 || s.Time-j.lastPrimary > millis(j.QuietFor)
	if t.IsOpen(subject) || (quiet && st.secRun >= j.SecondaryRun) {
		if st.run == 0 {
			st.Since, st.Peak, st.told = s.Since(), 0, 0
		}
		st.run++
		st.Peak = math.Max(st.Peak, secRate)
		t.Hold(s.Time, j.finding(s, st, true), em)
		return true
	}
	return false
}

// learn moves the port's baselines toward a sample that is not in excess,
// clipped at the limit so a fault that creeps in does not teach them.
func (j *Engine) learn(st *Port, v verdict) {
	n := st.baseN + 1
	alpha := 1 / float64(n)
	if span := j.BaseSpan.Seconds(); n > j.Warm && span > 0 {
		alpha = math.Min(1, v.secs/span)
	}
	st.Base += alpha * (math.Min(v.figure, v.limit) - st.Base)
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
func (j *Engine) judge(s *processor.Sample, st *Port, prim, sec float64) (v verdict, ok bool) {
	secs := float64(s.IntervalMs) / 1000
	figure := prim / secs
	if j.PerPacket {
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
	ref := st.Base
	if st.baseN < j.Warm {
		ref = 0
	}
	ref = math.Max(ref, j.peerRef)
	limit := j.Factor*ref + j.Floor
	primRate := prim / secs
	excessRate := primRate
	if j.PerPacket {
		excessRate = (figure - ref) * st.packetsPS
	}
	// A port is judged against its own history once it has one: a port
	// with high but healthy reordering is not an incident while it starts.
	primExcess := st.baseN >= j.Warm && figure > limit && excessRate >= j.MinRate

	secRate := sec / secs
	secFigure := secRate
	if j.PerPacket {
		xp, _ := s.CounterByID(idPortXmitPackets)
		secFigure = sec / math.Max(float64(xp.Delta), 1)
	}
	secRef := 0.0
	if st.baseN >= j.Warm {
		secRef = st.secBase
	}
	secLimit := j.Factor*secRef + j.SecFloor
	secExcess := len(j.Secondary) > 0 && st.baseN >= j.Warm && secRate >= j.MinRate && secFigure > secLimit

	return verdict{secs: secs, figure: figure, primRate: primRate, limit: limit,
		secRate: secRate, secFigure: secFigure, secLimit: secLimit, primExcess: primExcess, secExcess: secExcess}, true
}

// judgedSpansGap reports whether the sample's interval is over two and a
// half of the port's usual ones (plus a second of read jitter).
func judgedSpansGap(port *processor.PortState, s *processor.Sample) bool {
	usual := port.LastIntervalMs
	return usual > 0 && s.IntervalMs > usual*5/2+1000
}

// OnWatermark recomputes the fabric's median baseline once a minute and
// resolves incidents of silent ports.
func (j *Engine) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	if wm >= j.nextPeer {
		j.nextPeer = wm + judgedPeerRefreshMs
		var bases []float64
		fabric.Ports(func(p *processor.PortState) bool {
			if st, ok := processor.LookupPortLocal[Port](p, j.Type); ok && st.baseN >= j.Warm {
				bases = append(bases, st.Base)
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

func (j *Engine) finding(s *processor.Sample, st *Port, secondaryOnly bool) processor.Finding {
	summary, severity, checks := j.Describe(j, s, st, secondaryOnly)
	progress := st.Peak >= judgedProgressFactor*st.told && st.Peak > 0
	if progress {
		st.told = st.Peak
	}
	rates := map[string]any{}
	totals := map[string]any{}
	for i, c := range j.counters() {
		if st.rates[i] > 0 {
			rates[c.Name] = sig(float64(st.rates[i]))
		}
		if st.total[i] > 0 {
			totals[c.Name] = st.total[i]
		}
	}
	ev := map[string]any{
		"rates_per_s":        rates,
		"counts_since_onset": totals,
		"excess_since":       st.Since.String(),
		"interval_s":         float64(s.IntervalMs) / 1000,
		"baseline":           sig(st.Base),
		"fabric_baseline":    sig(j.peerRef),
		"figure":             sig(st.Figure),
		"peak":               sig(st.Peak),
		"secondary_only":     secondaryOnly,
	}
	if j.PerPacket {
		ev["per_received_packet"] = sig(st.Figure)
		ev["received_packets_per_s"] = sig(st.packetsPS)
	}
	if j.LossEvidence != nil && !secondaryOnly {
		j.LossEvidence(st, ev)
	}
	if peers := j.peerNames(s.ID.Subject(), s.Time); len(peers) > 0 {
		ev["peers"] = peers
	}
	return processor.Finding{
		Subject:  s.ID.Subject(),
		Onset:    st.Since,
		Severity: severity,
		Layer:    j.Layer,
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
func (j *Engine) peerNames(self schemas.Subject, now schemas.Millis) []string {
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

// RateOf is the latest rate of the named counter.
func (j *Engine) RateOf(st *Port, name string) float64 {
	for i, c := range j.counters() {
		if c.Name == name {
			return float64(st.rates[i])
		}
	}
	return 0
}

// sig rounds to 3 significant digits for evidence.
func sig(v float64) float64 { return processor.SigDigits(v, 3) }

// idPortRcvPackets is the denominator of the per-packet figures.
var (
	idPortRcvPackets  = schemas.MustCounterID(schemas.SourceCounters, "port_rcv_packets")
	idPortXmitPackets = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_packets")
)

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }
