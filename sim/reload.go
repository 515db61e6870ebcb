package sim

import (
	"fmt"
	"time"
)

// DriverReload is not a fault: the mlx5 driver of a node is reloaded at At
// (a firmware update, `modprobe -r mlx5_ib mlx5_core`), so every counter of
// every port of the node, a RoCE LAG's bond and members alike, restarts
// from zero, while the node's collector keeps running. Nothing is lost on
// the wire: a detector that raises an incident on it raises a false alarm.
// No label.
type DriverReload struct {
	Node string
	At   time.Time
}

// Start implements Fault.
func (f DriverReload) Start(l *Layout) (Effect, error) {
	f.At = f.At.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "driver_reload at", f.At); err != nil {
		return nil, err
	}
	e := &driverReload{spec: f}
	for _, p := range l.Ports {
		if p.Node == f.Node {
			e.ports = append(e.ports, p.PortRef)
		}
	}
	if len(e.ports) == 0 {
		return nil, fmt.Errorf("driver_reload: no node %q", f.Node)
	}
	return e, nil
}

type driverReload struct {
	spec  DriverReload
	ports []PortRef
}

func (e *driverReload) Ports() []PortRef { return e.ports }

// Apply clears the port in the window that holds the reload, before the
// traffic model counts the window: the reading shows what the port counted
// since (as the fleet's noise resets do).
func (e *driverReload) Apply(t *Tick) {
	if t.Within(e.spec.At) {
		t.Port.Clear()
	}
}

func (e *driverReload) Observe(*Tick)   {}
func (e *driverReload) Labels() []Label { return nil }
