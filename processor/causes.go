package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Cause linking: an incident names the incident that, by the counters,
// explains it (docs/formats.md, events: `cause`), and its summary says so in words.
// The links (docs/formats.md, typical causes):
//
//   - a pfc_storm whose origin port is a receive_starvation subject: the
//     receiver does not drain its queue, so its NIC pauses the fabric;
//   - retransmissions on a port whose own link shows a ber_drift past the
//     critical level, or a link_flap: the link loses the packets (a RoCE
//     LAG's members are its links, see lossyLink);
//   - a cnp_ecn_imbalance whose port has, by configuration, the ECN point
//     off that its counters show broken: a config_mismatch on the same port
//     naming ecn_np_enabled explains a notification point that sends no
//     CNPs, one naming ecn_rp_enabled a reaction point that ignores them;
//   - completion_errors whose evidence is receive-not-ready (RNR NAKs
//     received, rnr_nak_retry_err or mlx4's sq_num_rnr, or RNR retries run
//     out, mlx4's sq_num_rree, with the failed completions): one RNR failure
//     moves the requester's completion errors and the receiver's drops
//     together, and both detectors see it. The receiver's
//     receive_starvation is the root; the completion errors name it. Which
//     receiver a requester talks to is not in the counters, so the choice
//     is by what is known (see starving).
//
// Causes sits between a processor's detectors and its emitter: NewDetectors
// wraps every detector of one processor so that what they emit passes
// through one Causes, which keeps the open (and lately resolved) incidents
// by type and subject. A Tracker asks the emitter it is given (Linker) for a
// cause on every observation that holds; a cause found later than the
// incident's open is a material change, published at once. A cause stays
// with its incident once found.

// TypeConfigMismatch is the event type of the config_mismatch detector
// (processor/detect/configmismatch; docs/formats.md, types by layer).
const TypeConfigMismatch = "config_mismatch"

// RNRRetryCounters are what a requester counts when its receiver is not
// ready: RNR NAKs retried (mlx5 rnr_nak_retry_err, mlx4 sq_num_rnr) and
// retries run out (mlx4 sq_num_rree). A completion_errors incident whose
// evidence shows them is explained by a starving receiver (Causes);
// completion_errors reads the same counters for its summary.
var RNRRetryCounters = []string{"rnr_nak_retry_err", "sq_num_rree", "sq_num_rnr"}

// The settings of a config_mismatch's evidence ("settings") that explain a
// cnp_ecn_imbalance: the port's ECN notification point or reaction point
// is off, as the trace's config keys name them.
const (
	SettingECNNP = "ecn_np_enabled"
	SettingECNRP = "ecn_rp_enabled"
)

// Linker is implemented by an Emitter that knows the incidents around: the
// Tracker asks it for the cause of a finding of type typ.
type Linker interface {
	Link(typ string, f *Finding, now schemas.Millis) (cause *schemas.Cause, because string)
}

// CauseLinger is how long a resolved incident can still explain a new one
// (a flap that ended a minute before the retransmissions it left behind).
const CauseLinger = 10 * time.Minute

// Causes is one processor's book of incidents for cause linking; it is the
// Emitter its detectors get. Not safe for concurrent use: a processor calls
// its detectors from one goroutine.
type Causes struct {
	em Emitter // the processor's emitter for the current call
	// fabric is the processor's view (its topology names back-to-back
	// peers); nil until a detector is initialised.
	fabric  FabricView
	known   map[causeKey]*causeEntry
	pruneAt schemas.Millis
}

type causeKey struct {
	typ     string
	subject schemas.Subject
}

type causeEntry struct {
	id       string
	subject  schemas.Subject
	end      schemas.Millis // 0 while open
	eligible bool           // can explain others (a ber_drift past critical)
	because  string
	// settings are a config_mismatch's settings that differ.
	settings []string
	// A receive_starvation's receiver side: secondaryOnly when its subject
	// is a sender whose RNR retries run out (no monitored receiver
	// starves), and drops the receiver's latest drop or RNR-NAK-sent rate
	// per second.
	secondaryOnly bool
	drops         float64
}

// NewCauses returns an empty book.
func NewCauses() *Causes { return &Causes{known: map[causeKey]*causeEntry{}} }

// starvationDrops are what a starving receiver counts, by driver: buffers
// it had none for (mlx5 out_of_buffer, rx_out_of_buffer), packets the NIC
// dropped (rx_discards_phy), RNR NAKs it sent (mlx4 rq_num_rnr) and UD
// packets it had no receive for (mlx4 rq_num_udsdprd).
var starvationDrops = []string{"out_of_buffer", "rx_out_of_buffer", "rx_discards_phy", "rq_num_rnr", "rq_num_udsdprd"}

func (c *Causes) with(em Emitter) Emitter {
	c.em = em
	return c
}

// Emit implements Emitter: it notes the event, then passes it on.
func (c *Causes) Emit(ev *schemas.Event) {
	c.note(ev)
	if c.em != nil {
		c.em.Emit(ev)
	}
}

// Resume implements Resumer when the processor's emitter does.
func (c *Causes) Resume(typ, scope string, subject schemas.Subject, id string, start schemas.Millis) (Resumed, bool) {
	if r, ok := c.em.(Resumer); ok {
		return r.Resume(typ, scope, subject, id, start)
	}
	return Resumed{}, false
}

func (c *Causes) note(ev *schemas.Event) {
	switch ev.Type {
	case schemas.TypeReceiveStarvation, schemas.TypeBERDrift, schemas.TypeLinkFlap, TypeConfigMismatch, schemas.TypeCNPECNImbalance:
	default:
		return // explains nothing
	}
	k := causeKey{ev.Type, ev.Subject}
	e := c.known[k]
	if e == nil || e.id != ev.ID {
		e = &causeEntry{id: ev.ID, subject: ev.Subject}
		c.known[k] = e
	}
	if ev.End != nil {
		e.end = *ev.End
	}
	if ok, why := because(ev); ok {
		e.eligible, e.because = true, why
	}

	if s, ok := ev.Evidence["settings"].([]string); ok {
		e.settings = s
	}
	if ev.Type == schemas.TypeReceiveStarvation {
		if so, ok := ev.Evidence["secondary_only"].(bool); ok {
			e.secondaryOnly = so
		}
		if _, r := starvationRate(ev.Evidence); r > 0 {
			e.drops = r
		}
	}
	if ev.DetectedAt >= c.pruneAt {
		c.pruneAt = ev.DetectedAt + millis(CauseLinger)
		for k, e := range c.known {
			if e.end != 0 && ev.DetectedAt-e.end > millis(CauseLinger) {
				delete(c.known, k)
			}
		}
	}
}

// because says whether ev's incident can explain others and how, in words.
func because(ev *schemas.Event) (bool, string) {
	who := fmt.Sprintf("%s %s/%d", ev.Subject.Node, ev.Subject.Device, ev.Subject.Port)
	switch ev.Type {
	case schemas.TypeReceiveStarvation:
		if so, _ := ev.Evidence["secondary_only"].(bool); so {
			name, rate := rateIn(ev.Evidence, RNRRetryCounters)
			return true, fmt.Sprintf("a receiver of %s does not post receive buffers (%s %s/s)", who, name, HumanRate(rate))
		}
		name, rate := starvationRate(ev.Evidence)
		return true, fmt.Sprintf("%s does not drain its receive queue (%s %s/s)", who, name, HumanRate(rate))
	case schemas.TypeBERDrift:
		crossed, _ := ev.Evidence["critical_crossed"].(bool)
		now, _ := ev.Evidence["current_ber"].(float64)
		crit, _ := ev.Evidence["critical_ber"].(float64)
		if !crossed && !(crit > 0 && now >= crit) {
			return false, ""
		}
		return true, fmt.Sprintf("its link's BER (%.2g) is past the critical %.0g", now, crit)
	case schemas.TypeLinkFlap:
		return true, fmt.Sprintf("its link went down (%v time(s))", ev.Evidence["downs"])
	case TypeConfigMismatch:
		settings, _ := ev.Evidence["settings"].([]string)
		prio, _ := ev.Evidence["priority"].(int)
		var off []string
		for _, s := range settings {
			switch s {
			case SettingECNNP:
				off = append(off, "notification point")
			case SettingECNRP:
				off = append(off, "reaction point")
			}
		}
		if len(off) == 0 {
			return false, "" // an MTU or PFC mismatch explains no CNP imbalance
		}
		return true, fmt.Sprintf("its ECN %s is off on priority %d by configuration, unlike the rest of the fabric", strings.Join(off, " and "), prio)
	}
	return false, ""
}

// starvationRate is the largest drop rate of a receive_starvation's
// evidence and its counter; out_of_buffer at 0 when it shows none.
func starvationRate(evidence map[string]any) (string, float64) {
	return rateIn(evidence, starvationDrops)
}

// rateIn is the largest rate per second in evidence (rates_per_s) among
// names, and its name; the first name at 0 when none shows.
func rateIn(evidence map[string]any, names []string) (string, float64) {
	best, rate := names[0], 0.0
	r, _ := evidence["rates_per_s"].(map[string]any)
	for _, n := range names {
		if v, _ := r[n].(float64); v > rate {
			best, rate = n, v
		}
	}
	return best, rate
}

// rnrFailure reports whether a completion_errors finding shows the
// requester's RNR NAKs or RNR retries run out with its failed completions,
// now or since the onset.
func rnrFailure(f *Finding) bool {
	if _, r := rateIn(f.Evidence, RNRRetryCounters); r > 0 {
		return true
	}
	counts, _ := f.Evidence["counts_since_onset"].(map[string]any)
	for _, n := range RNRRetryCounters {
		if v, _ := counts[n].(uint64); v > 0 {
			return true
		}
	}
	return false
}

// Link implements Linker.
func (c *Causes) Link(typ string, f *Finding, now schemas.Millis) (*schemas.Cause, string) {
	if len(c.known) == 0 {
		return nil, ""
	}
	switch typ {
	case schemas.TypeCompletionErrors:
		if rnrFailure(f) {
			return c.starving(f, now)
		}
	case schemas.TypePFCStorm:
		subject := f.Subject
		if f.Origin != nil {
			subject = schemas.Subject{Node: f.Origin.Node, Device: f.Origin.Device, Port: f.Origin.Port}
		}
		return c.find(now, causeKey{schemas.TypeReceiveStarvation, subject})
	case schemas.TypeRetransmissions:
		return c.lossyLink(f.Subject, now)
	case schemas.TypeCNPECNImbalance:
		// Only the setting behind the kind of imbalance the port shows.
		k := causeKey{TypeConfigMismatch, f.Subject}
		e, ok := c.known[k]
		if !ok {
			return nil, ""
		}
		for _, key := range f.Keys {
			if key == "np_disabled" && slices.Contains(e.settings, SettingECNNP) ||
				key == "rp_ignoring" && slices.Contains(e.settings, SettingECNRP) {
				return c.find(now, k)
			}
		}
	}
	return nil, ""
}

// lossyLink finds what explains a loss on subject's link: a ber_drift past
// critical or a link_flap of the port itself, or of a member of its RoCE
// LAG. A drift still under critical is no cause (docs/formats.md): the
// Tracker asks again on every holding sample, so the link lands with the
// update in which the drift crosses.
func (c *Causes) lossyLink(subject schemas.Subject, now schemas.Millis) (*schemas.Cause, string) {
	return c.find(now, c.linkKeys(subject)...)
}

// linkKeys are the incidents of subject's own link(s): the port's, and
// its RoCE LAG members' (the physical layer is read per member: device
// <bond>.<member>), in a stable order.
func (c *Causes) linkKeys(subject schemas.Subject) []causeKey {
	keys := []causeKey{{schemas.TypeBERDrift, subject}, {schemas.TypeLinkFlap, subject}}
	var members []causeKey
	for k := range c.known {
		if (k.typ == schemas.TypeBERDrift || k.typ == schemas.TypeLinkFlap) && k.subject.Node == subject.Node &&
			strings.HasPrefix(k.subject.Device, subject.Device+".") {
			members = append(members, k)
		}
	}
	slices.SortFunc(members, func(a, b causeKey) int {
		if a.typ != b.typ {
			return strings.Compare(a.typ, b.typ)
		}
		return strings.Compare(a.subject.String(), b.subject.String())
	})
	return append(keys, members...)
}

// LinkFailing implements LinkHealth: whether subject's own link has an
// open ber_drift (past critical or not: a drift's BER estimate can lag
// the loss counters by minutes) or a link_flap open or resolved within
// CauseLinger.
func (c *Causes) LinkFailing(subject schemas.Subject, now schemas.Millis) bool {
	if len(c.known) == 0 {
		return false
	}
	for _, k := range c.linkKeys(subject) {
		e, ok := c.known[k]
		if !ok {
			continue
		}
		switch {
		case k.typ == schemas.TypeBERDrift && (e.end == 0 || e.eligible && now-e.end <= millis(CauseLinger)):
			return true
		case k.typ == schemas.TypeLinkFlap && (e.end == 0 || now-e.end <= millis(CauseLinger)):
			return true
		}
	}
	return false
}

// CongestionLoss implements LinkHealth: whether subject has an open
// cnp_ecn_imbalance. Its senders are not slowed down (a notification point
// that sends no CNPs), so the port drops and the drops come back as
// out-of-sequence packets: that loss is the imbalance's symptom, one fault,
// not a retransmissions incident of its own.
func (c *Causes) CongestionLoss(subject schemas.Subject, _ schemas.Millis) bool {
	e, ok := c.known[causeKey{schemas.TypeCNPECNImbalance, subject}]
	return ok && e.end == 0
}

// LinkHealth is implemented by an Emitter that knows the physical-layer
// incidents around (Causes): retransmissions asks it whether a port's own
// link is known to fail.
type LinkHealth interface {
	LinkFailing(subject schemas.Subject, now schemas.Millis) bool
	CongestionLoss(subject schemas.Subject, now schemas.Millis) bool
}

func (c *Causes) find(now schemas.Millis, keys ...causeKey) (*schemas.Cause, string) {
	for _, k := range keys {
		e, ok := c.known[k]
		if !ok || !e.eligible || (e.end != 0 && now-e.end > millis(CauseLinger)) {
			continue
		}
		return &schemas.Cause{ID: e.id, Type: k.typ, Subject: e.subject}, e.because
	}
	return nil, ""
}

// starving picks the receive_starvation incident that explains a
// requester's RNR failure (f, a completion_errors finding). The counters do
// not say which receiver a requester's QPs talk to, so the candidates are
// the starving receivers of this processor whose incident was on when the
// completions began to fail, ranked:
//
//  1. the other end of the requester's cable (a back-to-back link in the
//     topology: nothing else can be its receiver);
//  2. a receiver that counts drops or RNR NAKs sent on the requester's own
//     port (an mlx4 device counts both sides of its QPs on its lowest
//     port; a QP between two ports of one HCA), then on its node, then
//     anywhere in the fabric, the highest drop rate first;
//  3. a secondary-only starvation on the requester's own port: the
//     receive_starvation detector made the sender its subject because no
//     monitored receiver starves, and it is the same fault.
//
// A receiver the topology places out of the requester's reach (both ports
// known, no path) is not a candidate.
func (c *Causes) starving(f *Finding, now schemas.Millis) (*schemas.Cause, string) {
	var topo *schemas.Topology
	if c.fabric != nil {
		topo = c.fabric.Topology()
	}
	req := schemas.PortID{Node: f.Subject.Node, Device: f.Subject.Device, Port: f.Subject.Port}
	var best *causeEntry
	bestTier := -1
	for k, e := range c.known {
		if k.typ != schemas.TypeReceiveStarvation || !e.eligible {
			continue
		}
		if e.end != 0 && (e.end < f.Onset || now-e.end > millis(CauseLinger)) {
			continue // over before the completions failed
		}
		recv := schemas.PortID{Node: e.subject.Node, Device: e.subject.Device, Port: e.subject.Port}
		tier := 0
		switch {
		case e.secondaryOnly:
			if e.subject != f.Subject {
				continue // another sender's RNR failures: not a receiver
			}
			tier = 1
		case e.subject == f.Subject:
			tier = 4
		case e.subject.Node == f.Subject.Node:
			tier = 3
		default:
			tier = 2
		}
		if topo != nil && topo.HasPort(req) && topo.HasPort(recv) && req != recv {
			hops, ok := topo.Hops(req, recv)
			if !ok {
				continue // no path between them
			}
			if hops == 1 {
				tier = 5
			}
		}
		if tier > bestTier || tier == bestTier && (e.drops > best.drops ||
			e.drops == best.drops && e.subject.String() < best.subject.String()) {
			best, bestTier = e, tier
		}
	}
	if best == nil {
		return nil, ""
	}
	return &schemas.Cause{ID: best.id, Type: schemas.TypeReceiveStarvation, Subject: best.subject}, best.because
}

// linked is a detector of a processor whose events pass through the
// processor's Causes. It forwards what the inner detector implements.
type linked struct {
	Detector
	port   PortDetector
	fab    FabricDetector
	causes *Causes
}

// Unwrap returns the detector NewDetectors wrapped for cause linking.
func Unwrap(d Detector) Detector {
	if l, ok := d.(*linked); ok {
		return l.Detector
	}
	return d
}

func (l *linked) Init(fabric FabricView) error {
	l.causes.fabric = fabric
	if in, ok := l.Detector.(Initializer); ok {
		return in.Init(fabric)
	}
	return nil
}

func (l *linked) OnSample(ctx context.Context, port *PortState, s *Sample, em Emitter) {
	if l.port != nil {
		l.port.OnSample(ctx, port, s, l.causes.with(em))
	}
}

func (l *linked) OnWatermark(ctx context.Context, fabric FabricView, wm schemas.Millis, em Emitter) {
	if l.fab != nil {
		l.fab.OnWatermark(ctx, fabric, wm, l.causes.with(em))
	}
}

// Link wraps detectors of one processor so that they share one Causes.
func Link(dets []Detector) []Detector {
	c := NewCauses()
	out := make([]Detector, len(dets))
	for i, d := range dets {
		l := &linked{Detector: d, causes: c}
		l.port, _ = d.(PortDetector)
		l.fab, _ = d.(FabricDetector)
		out[i] = l
	}
	return out
}
