package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestInventoryPorts(t *testing.T) {
	at := func(s int64) schemas.Millis { return schemas.Millis(t0 + s*1000) }
	inv := func(node, boot string, s int64, from, to int) *schemas.Inventory {
		in := &schemas.Inventory{Node: node, BootID: boot, TimeMs: int64(at(s))}
		for p := from; p < to; p++ {
			in.Ports = append(in.Ports, schemas.PortInventory{Device: "mlx5_0", Port: p})
		}
		return in
	}
	type step struct {
		inv   *schemas.Inventory // queued when set
		apply schemas.Millis     // applied up to, when set
	}
	cases := []struct {
		name   string
		steps  []step
		at     schemas.Millis
		want   int
		wantOK bool
	}{
		{name: "nothing known", at: at(100)},
		{name: "one inventory, applied", steps: []step{{inv: inv("n", "b", 10, 1, 5)}, {apply: at(10)}}, at: at(100), want: 4, wantOK: true},
		{name: "one inventory, queued: counts for samples of its time on", steps: []step{{inv: inv("n", "b", 10, 1, 5)}}, at: at(10), want: 4, wantOK: true},
		{name: "one inventory, queued: not for earlier samples", steps: []step{{inv: inv("n", "b", 10, 1, 5)}}, at: at(9)},
		{name: "parts add up, applied", steps: []step{{inv: inv("n", "b", 10, 1, 3)}, {inv: inv("n", "b", 10, 3, 7)}, {apply: at(20)}}, at: at(20), want: 6, wantOK: true},
		{name: "parts add up, one applied one queued", steps: []step{{inv: inv("n", "b", 10, 1, 3)}, {apply: at(10)}, {inv: inv("n", "b", 10, 3, 7)}}, at: at(20), want: 6, wantOK: true},
		{name: "a part read twice counts once", steps: []step{{inv: inv("n", "b", 10, 1, 3)}, {inv: inv("n", "b", 10, 1, 3)}, {apply: at(10)}}, at: at(20), want: 2, wantOK: true},
		{name: "a newer inventory replaces", steps: []step{{inv: inv("n", "b", 10, 1, 9)}, {apply: at(10)}, {inv: inv("n", "c", 20, 1, 3)}, {apply: at(20)}}, at: at(30), want: 2, wantOK: true},
		{name: "a newer one queued replaces for its time on", steps: []step{{inv: inv("n", "b", 10, 1, 9)}, {apply: at(10)}, {inv: inv("n", "b", 20, 1, 10)}}, at: at(20), want: 9, wantOK: true},
		{name: "an older one read late is ignored", steps: []step{{inv: inv("n", "b", 20, 1, 3)}, {apply: at(20)}, {inv: inv("n", "b", 10, 1, 9)}, {apply: at(30)}}, at: at(30), want: 2, wantOK: true},
		{name: "another node's says nothing", steps: []step{{inv: inv("m", "b", 10, 1, 9)}, {apply: at(10)}}, at: at(20)},
		{name: "at most MaxBatchPorts", steps: []step{{inv: inv("n", "b", 10, 0, 900)}, {inv: inv("n", "b", 10, 900, 1800)}, {apply: at(10)}}, at: at(20), want: schemas.MaxBatchPorts, wantOK: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newConfigBook()
			for _, s := range c.steps {
				if s.inv != nil {
					b.queueInventoryPorts(s.inv)
				}
				if s.apply != 0 {
					b.apply(s.apply)
				}
			}
			if got, ok := b.inventoryPorts("n", c.at); got != c.want || ok != c.wantOK {
				t.Fatalf("inventoryPorts = %d %v, want %d %v", got, ok, c.want, c.wantOK)
			}
		})
	}
	b := newConfigBook()
	b.queueInventoryPorts(inv("n", "b", 10, 1, 3))
	b.apply(at(10))
	b.evict(at(11))
	if _, ok := b.inventoryPorts("n", at(20)); ok {
		t.Error("a node no inventory confirmed since the eviction's limit keeps its count")
	}
}

// portsBatch is node's batch i (5 s apart) with one sample of each port in
// ports (device mlx5_0).
func portsBatch(node string, i int, ports []int) *schemas.CounterBatch {
	b := &schemas.CounterBatch{Node: node, BootID: "boot", Seq: uint64(i), TimeMs: t0 + int64(i)*5000}
	for _, p := range ports {
		var flags schemas.Flag
		interval := int64(5000)
		if i == 0 {
			flags, interval = schemas.FlagFirst, 0
		}
		b.Ports = append(b.Ports, schemas.PortSample{
			Device: "mlx5_0", Port: p, LinkLayer: "Ethernet", State: "ACTIVE", TimeMs: b.TimeMs, IntervalMs: interval,
			Counters: []schemas.CounterDelta{{Name: "link_downed", Source: schemas.SourceCounters, Flags: flags}},
		})
	}
	return b
}

// TestPortsPerNode: a node may not grow the processor beyond its bound (its
// inventory's port count, else MaxPortsPerNode): the samples of further new
// ports are refused, counted and dead-lettered once for the node; the
// ports tracked already, and the other nodes, go on.
func TestPortsPerNode(t *testing.T) {
	portRange := func(from, to int) []int {
		var out []int
		for p := from; p < to; p++ {
			out = append(out, p)
		}
		return out
	}
	cases := []struct {
		name       string
		max        int
		inventory  int               // ports the node's inventory lists; 0: none
		batches    func(i int) []int // the ports of batch i
		n          int               // batches
		wantPorts  int               // of the node
		wantRefuse uint64
	}{
		{
			// The review's case, shortened: 150 batches grew a processor
			// to 154 631 ports.
			name: "a credential spraying 1024 new ports a batch, no inventory", n: 12,
			batches:   func(i int) []int { return portRange(1+i*1024, 1+(i+1)*1024) },
			wantPorts: DefaultMaxPortsPerNode, wantRefuse: 12*1024 - DefaultMaxPortsPerNode,
		},
		{
			name: "a configured bound", max: 8, n: 5,
			batches:   func(i int) []int { return portRange(1, 5+4*i) }, // 4, 8, 12, 16, 20 ports
			wantPorts: 8, wantRefuse: 4 + 8 + 12,
		},
		{
			name: "the inventory's count, below the default", inventory: 3, n: 4,
			batches:   func(int) []int { return portRange(1, 6) },
			wantPorts: 3, wantRefuse: 4 * 2,
		},
		{
			name: "the inventory's count, above the configured bound", max: 2, inventory: 6, n: 4,
			batches:   func(int) []int { return portRange(1, 7) },
			wantPorts: 6,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			js, _ := startJS(t)
			const node, other = "spray", "host-b"
			if c.inventory > 0 {
				inv := &schemas.Inventory{Version: schemas.Version, Node: node, BootID: "boot", TimeMs: t0}
				for p := 1; p <= c.inventory; p++ {
					inv.Ports = append(inv.Ports, schemas.PortInventory{Device: "mlx5_0", Port: p, LinkLayer: "Ethernet", State: "ACTIVE"})
				}
				publishInventory(t, js, schemas.InventorySubject(node), inv)
			}
			for i := 0; i < c.n; i++ {
				publish(t, js, portsBatch(node, i, c.batches(i)), "")
				publish(t, js, portsBatch(other, i, []int{1, 2}), "")
			}
			total := streamMsgs(t, js, schemas.StreamCounters)
			r := start(t, js, Config{MaxPortsPerNode: c.max})
			r.waitProcessed(t, total)
			p := r.procs[0]
			st := p.Stats()
			r.stop()
			if got := len(p.fabric.byNode[node]); got != c.wantPorts {
				t.Errorf("%d ports of %s tracked, want %d", got, node, c.wantPorts)
			}
			if got := len(p.fabric.byNode[other]); got != 2 {
				t.Errorf("%d ports of %s tracked, want 2", got, other)
			}
			if st.PortsPerNodeRefused != c.wantRefuse || st.Ports != uint64(c.wantPorts+2) {
				t.Errorf("refused %d samples (want %d), %d ports tracked", st.PortsPerNodeRefused, c.wantRefuse, st.Ports)
			}
			// The ports tracked kept their samples: every batch's.
			if want := uint64(2 * c.n); st.Samples < want+uint64(c.wantPorts) {
				t.Errorf("%d samples accepted", st.Samples)
			}
			byReason, all := deadLetters(t, js)
			wantDead := 0
			if c.wantRefuse > 0 {
				wantDead = 1
			}
			if byReason[ReasonPortsPerNode] != wantDead || len(all) != wantDead || st.DeadLetters != uint64(wantDead) {
				t.Fatalf("dead letters %v (%d), want %d for %q", byReason, st.DeadLetters, wantDead, ReasonPortsPerNode)
			}
			for _, h := range all {
				reason := h.Get(schemas.HeaderDeadReason)
				for _, want := range []string{"node " + node, fmt.Sprintf("has %d ports tracked", c.wantPorts)} {
					if !strings.Contains(reason, want) {
						t.Errorf("dead letter reason %q lacks %q", reason, want)
					}
				}
				if h.Get(nats.MsgIdHdr) == "" {
					t.Errorf("dead letter headers %v", *h)
				}
				t.Logf("dead letter: %s", reason)
			}
		})
	}
}

func TestMaxPortsPerNodeRefused(t *testing.T) {
	if err := (Config{MaxPortsPerNode: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "max ports per node -1") {
		t.Fatalf("Validate: %v", err)
	}
}
