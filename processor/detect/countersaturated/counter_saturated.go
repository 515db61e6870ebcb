// Package countersaturated is the counter_saturated detector: a port
// counter pinned at its maximum, which hides every further error or byte
// (Detector). It registers itself with processor.Register;
// processor/detect/all links it in.
package countersaturated

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeCounterSaturated, func() processor.Detector { return New() })
}

// Detector raises counter_saturated when a saturating error counter
// (schemas.KindOf(src, name).Saturating(): the IB PortCounters error
// counters) is pinned at its maximum: every error past that point is
// invisible until someone clears the counters, so BER and discard detectors
// go blind on the port.
//
// It also raises on a data or packet counter pinned at 2^32-1
// (port_{rcv,xmit}_{data,packets}, schemas.Ext64Sat32: the 32-bit
// PortCounters of an HCA or kernel without PortCountersExtended, mlx4 on old
// kernels). Such a counter reads as delta 0, an idle link: the port's
// throughput, utilisation and per-packet figures are blind, not zero. A
// warning: no error goes unseen, but every figure built on traffic is
// unknown, and clearing helps for seconds only on a busy link.
//
// port_xmit_wait (schemas.Sat32) is not an incident of its own: it counts
// the ticks a port had data and could not send, a congestion figure, not an
// error counter, and a busy InfiniBand port pins its 32 bits within hours to
// days in normal operation: an incident would page on every busy port of an
// IB fabric. No detector reads it; the sink keeps its saturated flag for the
// queries that plot it. When a port already has an incident, a pinned
// port_xmit_wait is listed in the evidence (also_pinned).
//
// A baseline counts: the value is pinned already. A held read glitch says
// nothing and leaves the counter's state as it was; an unread counter too.
// One incident per port; a further counter saturating is an update; the
// incident resolves when no counter of the port is pinned any more (someone
// cleared them: the collector reports a reset), or when the port has been
// silent for SilentResolveAfter.
//
// Silent is measured in the processor's watermark, from the later of the
// port's newest data time and the watermark when it last reported: a host
// whose clock lags the fleet's data time by more than SilentResolveAfter
// reports every interval with data times that far behind, and measured by
// its data time alone it looked silent at every watermark step. Its
// incident resolved, its next sample opened a new one, and so on at every
// step: 537 incidents on 8 ports in 2 minutes.
//
// Churn: a port whose incident resolved gets no new one for ReopenHold of
// watermark unless there is new evidence, a counter pinned that the
// resolved incident did not list (a material change, as within an
// incident). A port back from a silence with the same pinned counter, or a
// counter pinned again soon after it was cleared, is the same fault: at
// most one incident per ReopenHold. When one opens at the end of the hold,
// it starts at the first pinned reading the hold kept back.
type Detector struct {
	MinUpdateInterval  time.Duration // default 10 min: the figures of a pinned counter do not move
	SilentResolveAfter time.Duration // default 30 min
	ReopenHold         time.Duration // default 30 min

	tracker *processor.Tracker
	fabric  processor.FabricView
	// memo is the ports with an incident open, or resolved less than
	// ReopenHold ago.
	memo map[schemas.Subject]*saturatedMemo
}

// saturatedMemo is what the detector keeps of a port's incident past the
// port's own state (which the processor forgets with the port).
type saturatedMemo struct {
	// reported is the watermark at the port's latest sample while its
	// incident is open.
	reported schemas.Millis
	// pinned are the counters the incident listed, sorted.
	pinned []string
	// resolved is the watermark at the resolution; 0 while open.
	resolved schemas.Millis
	// heldSince is the data time of the first pinned reading the hold
	// kept back; 0 when none.
	heldSince schemas.Millis
}

// New returns the detector with its defaults.
func New() *Detector {
	return &Detector{MinUpdateInterval: 10 * time.Minute, SilentResolveAfter: 30 * time.Minute, ReopenHold: 30 * time.Minute}
}

// watermark is the processor's, or t without a fabric view.
func (d *Detector) watermark(t schemas.Millis) schemas.Millis {
	if d.fabric == nil {
		return t
	}
	return d.fabric.Watermark()
}

// held reports whether the port's pinned counters are kept back by the
// hold of its last incident; it forgets a hold that is over or that new
// evidence ends.
func (d *Detector) held(subject schemas.Subject, st *saturatedPort, wm, onset schemas.Millis) (bool, schemas.Millis) {
	m := d.memo[subject]
	if m == nil || m.resolved == 0 {
		return false, onset
	}
	fresh := false
	for _, p := range st.pinned {
		if _, found := slices.BinarySearch(m.pinned, p.name); !found {
			fresh = true
			break
		}
	}
	if !fresh && wm-m.resolved < millis(d.ReopenHold) {
		if m.heldSince == 0 {
			m.heldSince = onset
		}
		m.reported = wm
		return true, onset
	}
	if m.heldSince > 0 && !fresh {
		onset = min(onset, m.heldSince)
	}
	delete(d.memo, subject)
	return false, onset
}

// noteHold records the open incident's counters and that the port reported.
func (d *Detector) noteHold(subject schemas.Subject, st *saturatedPort, wm schemas.Millis) {
	if d.memo == nil {
		d.memo = map[schemas.Subject]*saturatedMemo{}
	}
	m := d.memo[subject]
	if m == nil {
		m = &saturatedMemo{}
		d.memo[subject] = m
	}
	m.reported = wm
	for _, p := range st.pinned {
		if i, found := slices.BinarySearch(m.pinned, p.name); !found {
			m.pinned = slices.Insert(m.pinned, i, p.name)
		}
	}
}

// noteResolved starts the port's hold.
func (d *Detector) noteResolved(subject schemas.Subject, wm schemas.Millis) {
	if m := d.memo[subject]; m != nil {
		m.resolved, m.heldSince = max(wm, 1), 0
	}
}

// Name implements processor.Detector.
func (d *Detector) Name() string { return schemas.TypeCounterSaturated }

// Init implements processor.Initializer.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *Detector) track() *processor.Tracker {
	if d.tracker == nil {
		d.tracker = processor.NewTracker(schemas.TypeCounterSaturated, processor.Policy{
			MinUpdateInterval:  d.MinUpdateInterval,
			SilentResolveAfter: d.SilentResolveAfter,
		})
	}
	return d.tracker
}

// saturatedPort is the per-port state: the pinned counters, sorted. Empty
// (nil) on a healthy port.
type saturatedPort struct {
	pinned []pinnedCounter
	// xmitWaitPinned: port_xmit_wait was pinned at the latest reading
	// (evidence only, see CounterSaturated).
	xmitWaitPinned bool
}

type pinnedCounter struct {
	name  string
	value uint64
	max   uint64
	data  bool // a data or packet counter (throughput blind), not an error counter
}

// OnSample implements processor.PortDetector.
func (d *Detector) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	t := d.track()
	subject := s.ID.Subject()
	st, _ := processor.LookupPortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
	onset := s.Time
	// Only the saturating and pinnable counters matter, all of them in the
	// dictionary: look them up by id instead of classifying every counter
	// by name.
	for _, list := range [2][]saturatingCounter{saturatingIDs, pinnableDataIDs} {
		for _, sc := range list {
			c, ok := s.CounterByID(sc.id)
			if !ok || c.Flags&schemas.FlagHeld != 0 {
				continue
			}
			pinned := c.Flags&schemas.FlagSaturated != 0 || sc.kind.Pinned(c.Value)
			if st == nil {
				if !pinned && !t.IsOpen(subject) {
					continue // the common case: a healthy counter on a healthy port
				}
				st = processor.PortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
			}
			i, found := slices.BinarySearchFunc(st.pinned, c.Name, func(p pinnedCounter, name string) int {
				return strings.Compare(p.name, name)
			})
			switch {
			case pinned && found:
				st.pinned[i].value = c.Value
			case pinned:
				st.pinned = slices.Insert(st.pinned, i, pinnedCounter{name: c.Name, value: c.Value, max: sc.max, data: sc.kind == schemas.Ext64Sat32})
				if c.Flags&schemas.FlagFirst == 0 && c.Delta > 0 {
					// It climbed to the top within this interval.
					onset = min(onset, s.Since())
				}
			case found:
				st.pinned = slices.Delete(st.pinned, i, i+1)
			}
		}
	}
	if st != nil {
		if c, ok := s.CounterByID(idPortXmitWait); ok && c.Flags&schemas.FlagHeld == 0 {
			st.xmitWaitPinned = c.Flags&schemas.FlagSaturated != 0 || schemas.Sat32.Pinned(c.Value)
		}
	}
	if st == nil {
		if !t.IsOpen(subject) {
			return
		}
		st = processor.PortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
	}
	wm := d.watermark(s.Time)
	if len(st.pinned) > 0 {
		if !t.Tracks(subject) {
			var held bool
			if held, onset = d.held(subject, st, wm, onset); held {
				return
			}
		}
		t.Hold(s.Time, d.finding(s, st, onset), em)
		d.noteHold(subject, st, wm)
		return
	}
	st.pinned, st.xmitWaitPinned = nil, false
	if m := d.memo[subject]; m != nil {
		m.heldSince = 0 // cleared: what the hold kept back is over
	}
	open := t.IsOpen(subject)
	t.Clear(s.Time, subject, "no counter is pinned any more (cleared)", nil, em)
	if open && !t.IsOpen(subject) {
		d.noteResolved(subject, wm)
	}
}

// OnWatermark implements processor.FabricDetector: incidents of silent ports resolve,
// and holds that are over are forgotten.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	for subject, m := range d.memo {
		// A hold that kept a pinned reading back stays until the port's
		// next reading opens the incident from it, or the port falls
		// silent.
		if m.resolved > 0 && wm-m.resolved >= millis(d.ReopenHold) && (m.heldSince == 0 || wm-m.reported >= millis(d.SilentResolveAfter)) {
			delete(d.memo, subject)
		}
	}
	d.track().Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		var seen schemas.Millis
		m := d.memo[s]
		if m != nil {
			seen = m.reported
		}
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if ok {
			seen = max(seen, p.LastTime)
		}
		return seen, ok || m != nil
	}, resolvedNoter{em: em, d: d, wm: wm})
}

// resolvedNoter passes the sweep's events on and starts the hold of the
// ports it resolves.
type resolvedNoter struct {
	em processor.Emitter
	d  *Detector
	wm schemas.Millis
}

func (r resolvedNoter) Emit(ev *schemas.Event) {
	r.em.Emit(ev)
	if ev.State == schemas.StateResolved {
		r.d.noteResolved(ev.Subject, r.wm)
	}
}

// Counters whose errors point at the cable, module or signal; the others
// (discards, buffer overruns, constraint and relay errors) point at
// congestion or configuration.
var physicalCounters = map[string]bool{
	"symbol_error":                    true,
	"link_error_recovery":             true,
	"link_downed":                     true,
	"local_link_integrity_errors":     true,
	"port_rcv_errors":                 true,
	"port_rcv_remote_physical_errors": true,
}

func (d *Detector) finding(s *processor.Sample, st *saturatedPort, onset schemas.Millis) processor.Finding {
	severity := schemas.SeverityWarning
	layer := schemas.LayerLinkNetwork
	names := make([]string, len(st.pinned))
	values := make(map[string]any, len(st.pinned))
	keys := make([]string, len(st.pinned))
	var errNames, dataNames []string
	for i, p := range st.pinned {
		names[i] = p.name
		values[p.name] = p.value
		keys[i] = "counter:" + p.name
		if p.data {
			dataNames = append(dataNames, p.name)
		} else {
			errNames = append(errNames, p.name)
		}
		if p.name == "symbol_error" || p.name == "port_rcv_errors" {
			// BER monitoring reads these two: it is blind now.
			severity = schemas.SeverityCritical
		}
		if physicalCounters[p.name] {
			layer = schemas.LayerPhysical
		}
	}
	where := processor.PortName(s.ID, s.Netdev)
	var parts []string
	if len(errNames) > 0 {
		parts = append(parts, pinnedWords(errNames, st)+"; new errors there are invisible until the counters are cleared")
	}
	if len(dataNames) > 0 {
		parts = append(parts, pinnedWords(dataNames, st)+" (32-bit counters without PortCountersExtended): they read as an idle link; the port's throughput figures are unknown, not zero")
	}
	evidence := map[string]any{
		"saturated": names,
		"values":    values,
		"state":     s.PortSample.State,
	}
	if len(dataNames) > 0 {
		evidence["blind_figures"] = []string{"rcv_gbps", "xmit_gbps", "utilisation", "packets_per_s"}
		evidence["blind_reason"] = "a 32-bit data or packet counter stops at 4294967295: its delta is 0 whatever the traffic"
	}
	if st.xmitWaitPinned {
		// Not an incident of its own (see CounterSaturated): said where
		// there is one.
		evidence["also_pinned"] = []string{"port_xmit_wait"}
		evidence["also_pinned_note"] = "port_xmit_wait (32-bit, saturating) is pinned: congestion time on this port is no longer counted; a congestion figure, not raised on its own"
	}
	dev := fmt.Sprintf("-C %s -P %d", s.ID.Device, s.ID.Port)
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, "perfquery -x "+dev, "save the readings; -x reads the 64-bit extended counters where the HCA has them"),
		processor.OnHost(s.ID.Node, "perfquery -R "+dev, "clear the counters, or new errors stay invisible"),
	}
	if layer == schemas.LayerPhysical {
		checks = append(checks, processor.OnHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -m -c", s.ID.Device, s.ID.Port), "cable/module, BER, FEC: where the errors come from"))
	} else if len(errNames) > 0 {
		checks = append(checks, processor.InRdmawatch(fmt.Sprintf("query port_timeline --node %s --device %s --port %d --from 1d", s.ID.Node, s.ID.Device, s.ID.Port), "port_xmit_wait and pause counters of the port: congestion behind the discards"))
	}
	if s.Netdev != "" {
		grep := "phy|discard"
		if len(dataNames) > 0 {
			grep = "phy|discard|bytes|packets"
		}
		checks = append(checks, processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E '%s'", s.Netdev, grep), "64-bit counters that keep counting"))
	}
	if len(dataNames) > 0 {
		checks = append(checks, processor.OnHost(s.ID.Node, "uname -r; modinfo -F version mlx4_ib mlx5_ib 2>/dev/null", "a kernel or driver that reads PortCountersExtended gives 64-bit data counters"))
	}
	checks = append(checks, processor.OnSwitch(d.fabric, s.ID, "error counters"))
	return processor.Finding{
		Subject:  s.ID.Subject(),
		Onset:    onset,
		Severity: severity,
		Layer:    layer,
		Summary:  fmt.Sprintf("%s: %s", where, strings.Join(parts, "; ")),
		Evidence: evidence,
		Checks:   checks,
		Keys:     keys,
	}
}

// pinnedWords says which counters are pinned, with the maximum when one is.
func pinnedWords(names []string, st *saturatedPort) string {
	if len(names) == 1 {
		for _, p := range st.pinned {
			if p.name == names[0] {
				return fmt.Sprintf("%s is pinned at its maximum %d", p.name, p.max)
			}
		}
	}
	return strings.Join(names, ", ") + " are pinned at their maximum"
}
