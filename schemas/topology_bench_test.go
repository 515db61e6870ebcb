package schemas

// Memory of a parsed topology grows with the fabric, not its square: a
// 6000-switch ring (one host on each switch) once took 1.77 GB.
//
//	go test -run '^$' -bench '^BenchmarkParseTopologyRing' -benchmem -benchtime 3x ./schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func ringTopology(switches int) string {
	t := struct {
		Fabric   string           `json:"fabric"`
		Switches []TopologySwitch `json:"switches"`
		Links    []TopologyLink   `json:"links"`
	}{Fabric: "ring"}
	for i := range switches {
		sw := fmt.Sprintf("sw-%05d", i)
		t.Switches = append(t.Switches, TopologySwitch{Name: sw, Tier: TierLeaf})
		t.Links = append(t.Links,
			TopologyLink{A: sw + "/swp1", B: fmt.Sprintf("sw-%05d/swp2", (i+1)%switches)},
			TopologyLink{A: fmt.Sprintf("host-%05d/mlx5_0/1", i), B: sw + "/swp3"})
	}
	b, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func BenchmarkParseTopologyRing6000(b *testing.B) {
	in := ringTopology(6000)
	b.ReportAllocs()
	for b.Loop() {
		topo, err := ParseTopology(strings.NewReader(in))
		if err != nil {
			b.Fatal(err)
		}
		// The queries a PFC storm makes: its neighbourhood and the
		// distance to a far port.
		a, far := PortID{"host-00000", "mlx5_0", 1}, PortID{"host-03000", "mlx5_0", 1}
		if h, ok := topo.Hops(a, far); !ok || h != 3002 {
			b.Fatalf("hops %d %v", h, ok)
		}
		if n := topo.Neighbours(a, 4); len(n) != 4 {
			b.Fatalf("neighbours %v", n)
		}
	}
}
