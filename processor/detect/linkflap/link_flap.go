// Package linkflap is the link_flap detector (layer physical): a port
// whose link goes down (Detector). It registers itself with
// processor.Register; processor/detect/all links it in.
package linkflap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeLinkFlap, func() processor.Detector { return New() })
}

// Detector raises link_flap when a port's link goes down: link_downed (sysfs
// counters, 8-bit saturating) or ethtool link_down_events_phy rises between
// two readings.
//
// Not flaps: a baseline (FlagFirst: a collector start knows no previous
// value), a reset (FlagReset: the counters were cleared or the driver
// reloaded, which bounces the link on purpose; a real flap in the same
// interval is missed, a rare price for no false alarm on every reload) and a
// held read glitch (FlagHeld: delta 0 anyway). Gaps and duplicates never reach
// the detector as deltas: the collector differences consecutive readings and
// the runtime drops samples not newer than the port's last one.
//
// One incident per port: it opens on the first down, updates when the link
// goes down again (at most once per MinUpdateInterval) or turns critical,
// and resolves once the port's own samples show the link up and no new down
// for StableAfter. A link that stays down keeps the incident open. A port
// that goes silent cannot show it is stable; its incident resolves when the
// watermark passes its last sample by SilentResolveAfter, saying so, so no
// incident stays open forever.
type Detector struct {
	StableAfter        time.Duration // default 5 min
	CriticalDowns      uint64        // downs within one incident that make it critical; default 3
	MinUpdateInterval  time.Duration // default 1 min
	SilentResolveAfter time.Duration // default 30 min

	tracker *processor.Tracker
	fabric  processor.FabricView
}

// New returns the detector with its defaults; change the fields
// before the first sample.
func New() *Detector {
	return &Detector{
		StableAfter:        5 * time.Minute,
		CriticalDowns:      3,
		MinUpdateInterval:  time.Minute,
		SilentResolveAfter: 30 * time.Minute,
	}
}

// Name implements processor.Detector.
func (d *Detector) Name() string { return schemas.TypeLinkFlap }

// Init implements processor.Initializer: the topology names the switch port to check.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *Detector) track() *processor.Tracker {
	if d.tracker == nil {
		d.tracker = processor.NewTracker(schemas.TypeLinkFlap, processor.Policy{
			ResolveAfter:       d.StableAfter,
			MinUpdateInterval:  d.MinUpdateInterval,
			SilentResolveAfter: d.SilentResolveAfter,
		})
	}
	return d.tracker
}

// linkFlapPort is the per-port state: what the current incident has seen.
type linkFlapPort struct {
	downs      uint64 // downs counted in the current incident
	firstDown  schemas.Millis
	lastDown   schemas.Millis
	linkDowned uint64 // latest raw readings, for the evidence
	phyDowns   uint64
	// A RoCE LAG member's downs waiting one reading for the bond's verdict
	// (see lagMemberHeld), and when they began.
	pending      uint64
	pendingSince schemas.Millis
}

// lagMemberHeld decides a RoCE LAG member's downs (its own sample, device
// schemas.BondMemberDevice). A member link that went down while the bond
// port went down too is the bond's flap: one fault, one incident, on the
// port RDMA traffic uses. Only a flap the LAG rode through (the bond stayed
// up) is the member's own. The two samples of one reading come in no set
// order, so a member's first down waits one reading of the member for the
// bond's verdict. It returns true when the sample is done with; else downs
// is what the member opens or updates with.
func (d *Detector) lagMemberHeld(port *processor.PortState, s *processor.Sample, downs *uint64) bool {
	bond, _, ok := schemas.SplitBondMember(s.ID.Device)
	if !ok {
		return false
	}
	t := d.track()
	st, have := processor.LookupPortLocal[linkFlapPort](port, schemas.TypeLinkFlap)
	if t.IsOpen(schemas.Subject{Node: s.ID.Node, Device: bond, Port: s.ID.Port}) {
		if have {
			st.pending = 0
		}
		return true // the bond's incident holds this flap
	}
	if !have && *downs == 0 {
		return true
	}
	st = processor.PortLocal[linkFlapPort](port, schemas.TypeLinkFlap)
	if st.pending == 0 {
		if *downs > 0 {
			st.pending, st.pendingSince = *downs, s.Since()
		}
		return true
	}
	// The bond stayed up a reading later: the member's own flap.
	*downs += st.pending
	st.pending = 0
	return false
}

// OnSample implements processor.PortDetector.
func (d *Detector) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	t := d.track()
	subject := s.ID.Subject()
	downs, seen := linkDowns(s)
	downs = misreadDowns(port, s, downs, seen)
	open := t.IsOpen(subject)
	var since schemas.Millis
	if !open {
		if st, ok := processor.LookupPortLocal[linkFlapPort](port, schemas.TypeLinkFlap); ok && st.pending > 0 {
			since = st.pendingSince
		}
		if d.lagMemberHeld(port, s, &downs) {
			return
		}
	}
	if downs == 0 && !open {
		return
	}
	st := processor.PortLocal[linkFlapPort](port, schemas.TypeLinkFlap)
	if seen.ok[0] {
		st.linkDowned = seen.v[0]
	}
	if seen.ok[1] {
		st.phyDowns = seen.v[1]
	}
	switch {
	case downs > 0:
		if !open {
			st.downs, st.firstDown = 0, s.Since()
			if since != 0 {
				st.firstDown = since // a LAG member's down that waited a reading
			}
		}
		st.downs += downs
		st.lastDown = s.Time
		t.Hold(s.Time, d.finding(s, st, downs, true), em)
	case !linkUp(s.PortSample.State):
		// Down and staying down is not stable: stability counts from the
		// first sample that shows the link up again.
		t.Hold(s.Time, d.finding(s, st, 0, false), em)
	default:
		t.Clear(s.Time, subject, fmt.Sprintf("the link has been up without a new down for %s", d.StableAfter),
			map[string]any{"stable_since": st.lastDown.String()}, em)
	}
}

// OnWatermark implements processor.FabricDetector: it resolves incidents of ports that
// went silent.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	d.track().Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
}

// linkDowns returns how many times the link went down in the sample's
// interval, and the raw readings of link_downed ([0]) and
// link_down_events_phy ([1]). Both counters count the same events, so the
// larger delta is the answer, never the sum.
//
// A port reset (any counter of the sample flagged FlagReset: a driver reload
// or a clear) makes the interval's downs unknowable: a reload bounces the
// link on purpose and leaves link_downed at 0 or 1, so a link_downed that
// was 0 and reads 1 after the reload did not fall and carries no reset flag
// of its own; the reset of the port's other counters is what tells.
func linkDowns(s *processor.Sample) (downs uint64, seen linkReadings) {
	portReset := s.AnyFlags()&schemas.FlagReset != 0
	for which, id := range [2]schemas.CounterID{idLinkDowned, idLinkDownEventsPhy} {
		c, ok := s.CounterByID(id)
		if !ok {
			continue
		}
		if c.Flags&schemas.FlagHeld == 0 {
			seen.v[which], seen.ok[which] = c.Value, true
		}
		if portReset || c.Flags&(schemas.FlagFirst|schemas.FlagReset|schemas.FlagHeld) != 0 {
			continue
		}
		seen.d[which] = c.Delta
		downs = max(downs, c.Delta)
	}
	return downs, seen
}

// phyZeroBase is kept for a port whose first reading had
// link_down_events_phy at 0 while link_downed, which counts the same
// events, was not: the 0 may be a misread that no later reading can hold
// as a glitch (there was no earlier value to hold). Until the PHY counter
// has counted past what link_downed already showed, a rise of it while
// link_downed stays put is that misread catching up, not new downs.
type phyZeroBase struct {
	owed uint64 // downs link_downed counted that the PHY counter has not
}

// misreadDowns returns downs without the PHY counter's catch-up (see
// phyZeroBase); port state exists only for ports whose first reading
// showed the disagreement.
func misreadDowns(port *processor.PortState, s *processor.Sample, downs uint64, seen linkReadings) uint64 {
	if ld, ok := s.CounterByID(idLinkDowned); ok && ld.Flags&schemas.FlagFirst != 0 && ld.Value > 0 {
		if phy, ok := s.CounterByID(idLinkDownEventsPhy); ok && phy.Flags&schemas.FlagFirst != 0 && phy.Value == 0 {
			processor.PortLocal[phyZeroBase](port, phyZeroBaseKey).owed = ld.Value
		}
		return downs
	}
	zb, ok := processor.LookupPortLocal[phyZeroBase](port, phyZeroBaseKey)
	if !ok || zb.owed == 0 {
		return downs
	}
	if s.AnyFlags()&schemas.FlagReset != 0 {
		zb.owed = 0 // both counters start over: nothing is owed
		return downs
	}
	if seen.d[1] == 0 || seen.d[0] > 0 {
		return downs
	}
	caught := min(zb.owed, seen.d[1])
	zb.owed -= caught
	return max(seen.d[0], seen.d[1]-caught)
}

// phyZeroBaseKey names phyZeroBase among the port's detector states.
const phyZeroBaseKey = schemas.TypeLinkFlap + "/phy-zero-baseline"

// linkReadings are the raw readings of link_downed ([0]) and
// link_down_events_phy ([1]) when read (ok).
type linkReadings struct {
	v  [2]uint64
	ok [2]bool
	d  [2]uint64 // the deltas counted as downs
}

// linkUp reads the sysfs state text ("ACTIVE", "4: ACTIVE"); an unknown
// (empty) state does not hold an incident open.
func linkUp(state string) bool {
	if state == "" {
		return true
	}
	return strings.Contains(strings.ToUpper(state), "ACTIVE")
}

func (d *Detector) finding(s *processor.Sample, st *linkFlapPort, downsNow uint64, progress bool) processor.Finding {
	severity := schemas.SeverityWarning
	if st.downs >= d.CriticalDowns {
		severity = schemas.SeverityCritical
	}
	where := processor.PortName(s.ID, s.Netdev)
	summary := fmt.Sprintf("%s: the link went down %d time(s) since %s", where, st.downs, st.firstDown)
	if !linkUp(s.PortSample.State) {
		summary = fmt.Sprintf("%s: the link went down %d time(s) since %s and is %s", where, st.downs, st.firstDown, s.PortSample.State)
	}
	evidence := map[string]any{
		"downs":                st.downs,
		"downs_this_sample":    downsNow,
		"first_down_after":     st.firstDown.String(),
		"last_down_at":         st.lastDown.String(),
		"interval_s":           float64(s.IntervalMs) / 1000,
		"state":                s.PortSample.State,
		"link_downed":          st.linkDowned,
		"link_down_events_phy": st.phyDowns,
	}
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, fmt.Sprintf("ibstat %s %d", s.ID.Device, s.ID.Port), "state, physical state, rate"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -m -c", s.ID.Device, s.ID.Port), "cable/module, eye, BER"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("dmesg -T | grep -iE '(%s).*link'", grepName(s.ID.Device, s.Netdev)), "when the link went down and came back"),
	}
	if s.Netdev != "" {
		checks = append(checks, processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool %s; ethtool -S %s | grep -E 'link_down|phy'", s.Netdev, s.Netdev), "speed, FEC mode and the PHY's link-down count"))
	}
	checks = append(checks, processor.OnSwitch(d.fabric, s.ID, "port log and link-down counters"))
	onset := s.Since()
	if st.firstDown != 0 {
		onset = min(onset, st.firstDown) // a LAG member's down that waited a reading
	}
	return processor.Finding{
		Subject:  s.ID.Subject(),
		Onset:    onset,
		Severity: severity,
		Layer:    schemas.LayerPhysical,
		Summary:  summary,
		Evidence: evidence,
		Checks:   checks,
		Progress: progress,
	}
}

func grepName(device, netdev string) string {
	if netdev != "" {
		return device + "|" + netdev
	}
	return device
}
