package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	Register(schemas.TypeCounterSaturated, func() Detector { return NewCounterSaturated() })
}

// CounterSaturated raises counter_saturated when a saturating error counter
// (schemas.KindOf(src, name).Saturating(): the IB PortCounters error
// counters) is pinned at its maximum: every error past that point is
// invisible until someone clears the counters, so BER and discard detectors
// go blind on the port.
//
// A baseline counts: the value is pinned already. A held read glitch says
// nothing and leaves the counter's state as it was; an unread counter too.
// One incident per port; a further counter saturating is an update; the
// incident resolves when no counter of the port is pinned any more (someone
// cleared them: the collector reports a reset).
type CounterSaturated struct {
	MinUpdateInterval  time.Duration // default 10 min: the figures of a pinned counter do not move
	SilentResolveAfter time.Duration // default 30 min

	tracker *Tracker
	fabric  FabricView
}

// NewCounterSaturated returns the detector with its defaults.
func NewCounterSaturated() *CounterSaturated {
	return &CounterSaturated{MinUpdateInterval: 10 * time.Minute, SilentResolveAfter: 30 * time.Minute}
}

// Name implements Detector.
func (d *CounterSaturated) Name() string { return schemas.TypeCounterSaturated }

// Init implements Initializer.
func (d *CounterSaturated) Init(fabric FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *CounterSaturated) track() *Tracker {
	if d.tracker == nil {
		d.tracker = NewTracker(schemas.TypeCounterSaturated, Policy{
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
}

type pinnedCounter struct {
	name  string
	value uint64
	max   uint64
}

// OnSample implements PortDetector.
func (d *CounterSaturated) OnSample(_ context.Context, port *PortState, s *Sample, em Emitter) {
	t := d.track()
	subject := s.ID.Subject()
	st, _ := LookupPortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
	onset := s.Time
	// Only the saturating counters matter, all of them in the dictionary:
	// look them up by id instead of classifying every counter by name.
	for _, sc := range saturatingIDs {
		c, ok := s.CounterByID(sc.id)
		if !ok || c.Flags&schemas.FlagHeld != 0 {
			continue
		}
		pinned := c.Flags&schemas.FlagSaturated != 0 || c.Value >= sc.max
		if st == nil {
			if !pinned && !t.IsOpen(subject) {
				continue // the common case: a healthy counter on a healthy port
			}
			st = PortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
		}
		i, found := slices.BinarySearchFunc(st.pinned, c.Name, func(p pinnedCounter, name string) int {
			return strings.Compare(p.name, name)
		})
		switch {
		case pinned && found:
			st.pinned[i].value = c.Value
		case pinned:
			st.pinned = slices.Insert(st.pinned, i, pinnedCounter{name: c.Name, value: c.Value, max: sc.max})
			if c.Flags&schemas.FlagFirst == 0 && c.Delta > 0 {
				// It climbed to the top within this interval.
				onset = min(onset, s.Since())
			}
		case found:
			st.pinned = slices.Delete(st.pinned, i, i+1)
		}
	}
	if st == nil {
		if !t.IsOpen(subject) {
			return
		}
		st = PortLocal[saturatedPort](port, schemas.TypeCounterSaturated)
	}
	if len(st.pinned) > 0 {
		t.Hold(s.Time, d.finding(s, st, onset), em)
		return
	}
	st.pinned = nil
	t.Clear(s.Time, subject, "no counter is pinned any more (cleared)", nil, em)
}

// OnWatermark implements FabricDetector: incidents of silent ports resolve.
func (d *CounterSaturated) OnWatermark(_ context.Context, fabric FabricView, wm schemas.Millis, em Emitter) {
	d.track().Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
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

func (d *CounterSaturated) finding(s *Sample, st *saturatedPort, onset schemas.Millis) Finding {
	severity := schemas.SeverityWarning
	layer := schemas.LayerLinkNetwork
	names := make([]string, len(st.pinned))
	values := make(map[string]any, len(st.pinned))
	keys := make([]string, len(st.pinned))
	for i, p := range st.pinned {
		names[i] = p.name
		values[p.name] = p.value
		keys[i] = "counter:" + p.name
		if p.name == "symbol_error" || p.name == "port_rcv_errors" {
			// BER monitoring reads these two: it is blind now.
			severity = schemas.SeverityCritical
		}
		if physicalCounters[p.name] {
			layer = schemas.LayerPhysical
		}
	}
	where := portName(s.ID, s.Netdev)
	var what string
	if len(names) == 1 {
		what = fmt.Sprintf("%s is pinned at its maximum %d", names[0], st.pinned[0].max)
	} else {
		what = strings.Join(names, ", ") + " are pinned at their maximum"
	}
	dev := fmt.Sprintf("-C %s -P %d", s.ID.Device, s.ID.Port)
	checks := []schemas.Check{
		onHost(s.ID.Node, "perfquery -x "+dev, "save the readings"),
		onHost(s.ID.Node, "perfquery -R "+dev, "clear the counters, or new errors stay invisible"),
	}
	if layer == schemas.LayerPhysical {
		checks = append(checks, onHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -m -c", s.ID.Device, s.ID.Port), "cable/module, BER, FEC: where the errors come from"))
	} else {
		checks = append(checks, inRdmawatch(fmt.Sprintf("query port_timeline --node %s --device %s --port %d --from 1d", s.ID.Node, s.ID.Device, s.ID.Port), "port_xmit_wait and pause counters of the port: congestion behind the discards"))
	}
	if s.Netdev != "" {
		checks = append(checks, onHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'phy|discard'", s.Netdev), "64-bit counters that keep counting"))
	}
	checks = append(checks, onSwitch(d.fabric, s.ID, "error counters"))
	return Finding{
		Subject:  s.ID.Subject(),
		Onset:    onset,
		Severity: severity,
		Layer:    layer,
		Summary:  fmt.Sprintf("%s: %s; new errors there are invisible until the counters are cleared", where, what),
		Evidence: map[string]any{
			"saturated": names,
			"values":    values,
			"state":     s.PortSample.State,
		},
		Checks: checks,
		Keys:   keys,
	}
}
