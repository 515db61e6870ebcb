package engine

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestFabricByNodeFollowsPorts: the per-node index process reads ports
// through holds exactly the states of ports, as ports are added and
// evicted, and a port evicted and seen again gets a new state in both.
func TestFabricByNodeFollowsPorts(t *testing.T) {
	f := newFabric(nil, false)
	ids := []schemas.PortID{
		{Node: "a", Device: "mlx5_0", Port: 1}, {Node: "a", Device: "mlx5_0", Port: 2}, {Node: "a", Device: "mlx5_1", Port: 1},
		{Node: "b", Device: "mlx5_0", Port: 1}, {Node: "c", Device: "mlx5_0", Port: 1},
	}
	last := map[schemas.PortID]schemas.Millis{ids[0]: 100, ids[1]: 5, ids[2]: 100, ids[3]: 5, ids[4]: 100}
	for _, id := range ids {
		f.get(id).LastTime = last[id]
	}
	check := func(when string) {
		t.Helper()
		n := 0
		for node, ports := range f.byNode {
			if len(ports) == 0 {
				t.Errorf("%s: node %s listed without ports", when, node)
			}
			for _, np := range ports {
				n++
				id := schemas.PortID{Node: node, Device: np.device, Port: np.port}
				if f.ports[id] != np.state || np.state.ID != id {
					t.Errorf("%s: byNode has %v as %p, ports as %p", when, id, np.state, f.ports[id])
				}
			}
		}
		if n != len(f.ports) {
			t.Errorf("%s: byNode lists %d ports, ports holds %d", when, n, len(f.ports))
		}
		for id, st := range f.ports {
			if got := find(f.byNode[id.Node], id.Device, id.Port); got != st {
				t.Errorf("%s: find(%v) = %p, want %p", when, id, got, st)
			}
		}
	}
	check("after adding")
	if find(f.byNode["a"], "mlx5_1", 2) != nil || find(f.byNode["z"], "mlx5_0", 1) != nil {
		t.Error("find returned a state for a port never seen")
	}
	if n := f.evict(50); n != 2 {
		t.Fatalf("evicted %d ports, want 2", n)
	}
	check("after evicting")
	if _, ok := f.byNode["b"]; ok {
		t.Error("node b, all of whose ports were evicted, is still listed")
	}
	old := ids[1]
	st := f.get(old)
	if st.Samples != 0 || st.LastTime != 0 {
		t.Errorf("a port seen again after its eviction kept its old state %+v", st)
	}
	check("after seeing an evicted port again")
}
