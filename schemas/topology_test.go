package schemas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const exampleTopology = `{"fabric": "example",
 "switches": [{"name": "leaf-01", "tier": "leaf"}, {"name": "leaf-02", "tier": "leaf"}, {"name": "spine-01", "tier": "spine"}],
 "links": [
  {"a": "host-a/mlx5_0/1", "b": "leaf-01/swp1"},
  {"a": "host-b/mlx5_0/1", "b": "leaf-01/swp2"},
  {"a": "host-c/mlx5_0/1", "b": "leaf-02/swp1"},
  {"a": "leaf-01/swp49", "b": "spine-01/swp1"},
  {"a": "leaf-02/swp49", "b": "spine-01/swp2"}]}`

func hp(node string) PortID { return PortID{Node: node, Device: "mlx5_0", Port: 1} }

func TestParseTopologyExample(t *testing.T) {
	// The format's example must parse; it is what replay users start from.
	if b, err := os.ReadFile("../test/fixtures/examples/topology.json"); err == nil {
		if _, err := ParseTopology(strings.NewReader(string(b))); err != nil {
			t.Fatalf("shared example: %v", err)
		}
	}
	topo, err := ParseTopology(strings.NewReader(exampleTopology))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Fabric != "example" || topo.Tier("spine-01") != TierSpine {
		t.Fatalf("fabric %q tier %q", topo.Fabric, topo.Tier("spine-01"))
	}
	sw, swPort, ok := topo.AttachedSwitch(hp("host-b"))
	if !ok || sw != "leaf-01" || swPort != "swp2" {
		t.Fatalf("host-b attaches to %q %q %v", sw, swPort, ok)
	}
	hops := []struct {
		a, b PortID
		want int
		ok   bool
	}{
		{hp("host-a"), hp("host-a"), 0, true},
		{hp("host-a"), hp("host-b"), 2, true},
		{hp("host-b"), hp("host-a"), 2, true},
		{hp("host-a"), hp("host-c"), 4, true},
		{hp("host-a"), hp("host-x"), 0, false},
		{hp("host-a"), PortID{"host-a", "mlx5_0", 2}, 0, false},
	}
	for _, h := range hops {
		got, ok := topo.Hops(h.a, h.b)
		if got != h.want || ok != h.ok {
			t.Errorf("Hops(%v, %v) = %d %v, want %d %v", h.a, h.b, got, ok, h.want, h.ok)
		}
	}
	gotN := topo.Neighbours(hp("host-a"), 4)
	wantN := []PortDistance{{hp("host-b"), 2}, {hp("host-c"), 4}}
	if !reflect.DeepEqual(gotN, wantN) {
		t.Fatalf("Neighbours = %v, want %v", gotN, wantN)
	}
	if n := topo.Neighbours(hp("host-a"), 2); len(n) != 1 || n[0].Port != hp("host-b") {
		t.Fatalf("Neighbours(2) = %v", n)
	}
	if got := topo.SwitchNeighbours("spine-01"); !reflect.DeepEqual(got, []string{"leaf-01", "leaf-02"}) {
		t.Fatalf("SwitchNeighbours = %v", got)
	}
	if got := topo.HostPorts("leaf-01"); !reflect.DeepEqual(got, []PortID{hp("host-a"), hp("host-b")}) {
		t.Fatalf("HostPorts = %v", got)
	}
}

func TestParseTopologyBackToBackAndSlashPorts(t *testing.T) {
	topo, err := ParseTopology(strings.NewReader(`{"fabric":"lab","switches":[{"name":"sw1","tier":"leaf"}],
		"links":[{"a":"n1/mlx5_0/1","b":"n2/mlx5_0/1"},{"a":"n3/mlx5_1/2","b":"sw1/Ethernet1/1"}],"future_field":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := topo.Hops(hp("n1"), hp("n2")); !ok || h != 1 {
		t.Fatalf("back-to-back hops %d %v", h, ok)
	}
	if _, p, ok := topo.AttachedSwitch(PortID{"n3", "mlx5_1", 2}); !ok || p != "Ethernet1/1" {
		t.Fatalf("switch port %q %v", p, ok)
	}
	if _, _, ok := topo.AttachedSwitch(hp("n1")); ok {
		t.Fatal("back-to-back port has no switch")
	}
}

func TestParseTopologyErrors(t *testing.T) {
	sw := `"switches":[{"name":"leaf-01","tier":"leaf"}]`
	cases := []struct {
		name, in, want string
	}{
		{"not json", `{`, "topology"},
		{"trailing", `{} {}`, "data after"},
		{"bad tier", `{"switches":[{"name":"x","tier":"edge"}]}`, `switches[0] "x": tier "edge"`},
		{"dup switch", `{"switches":[{"name":"x","tier":"leaf"},{"name":"x","tier":"spine"}]}`, "listed twice"},
		{"empty switch", `{"switches":[{"name":"","tier":"leaf"}]}`, "empty name"},
		{"unknown switch", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-09/swp1"}]}`, `links[0].b "leaf-09/swp1": unknown switch "leaf-09"`},
		{"bad port", `{` + sw + `,"links":[{"a":"h/mlx5_0/x","b":"leaf-01/swp1"}]}`, `links[0].a "h/mlx5_0/x": port "x"`},
		{"port zero", `{` + sw + `,"links":[{"a":"h/mlx5_0/0","b":"leaf-01/swp1"}]}`, `links[0].a`},
		{"empty endpoint", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":""}]}`, `links[0].b "": empty endpoint`},
		{"too many parts", `{` + sw + `,"links":[{"a":"a/b/c/d","b":"leaf-01/swp1"}]}`, `links[0].a "a/b/c/d"`},
		{"switch without port", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01"}]}`, `links[0].b "leaf-01": switch endpoint`},
		{"port cabled twice", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01/swp1"},{"a":"h/mlx5_0/1","b":"leaf-01/swp2"}]}`, `links[1].a "h/mlx5_0/1": already cabled by links[0]`},
		{"switch port twice", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01/swp1"},{"a":"g/mlx5_0/1","b":"leaf-01/swp1"}]}`, `links[1].b`},
		{"switch loop", `{` + sw + `,"links":[{"a":"leaf-01/swp1","b":"leaf-01/swp2"}]}`, `links[0]: links switch "leaf-01" to itself`},
		{"null", `null`, "no switches and no links (a null or empty topology)"},
		{"empty object", `{}`, "no switches and no links"},
		{"empty lists", `{"fabric":"x","switches":[],"links":[]}`, "no switches and no links"},
		{"switches only", `{` + sw + `}`, "no link names a host port"},
		{"no host link", `{"switches":[{"name":"a","tier":"leaf"},{"name":"b","tier":"spine"}],"links":[{"a":"a/1","b":"b/1"}]}`, "no link names a host port"},
		{"rack of an unknown node", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01/swp1"}],"racks":{"r1":["h","g"]}}`, `racks["r1"][1] "g": no link names this node`},
		{"node in two racks", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01/swp1"}],"racks":{"r1":["h"],"r2":["h"]}}`, `racks["r2"][0] "h": node already in rack "r1"`},
		{"rack without a name", `{` + sw + `,"links":[{"a":"h/mlx5_0/1","b":"leaf-01/swp1"}],"racks":{"":["h"]}}`, "racks: a rack with an empty name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTopology(strings.NewReader(c.in))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidTopology) {
				t.Errorf("%v does not wrap ErrInvalidTopology", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// TestTopologyRacks: "racks" is optional; a node it names reports its
// rack, any other node none.
func TestTopologyRacks(t *testing.T) {
	plain, err := ParseTopology(strings.NewReader(exampleTopology))
	if err != nil {
		t.Fatal(err)
	}
	if r := plain.Rack("host-a"); r != "" {
		t.Errorf("without racks: host-a in rack %q", r)
	}
	withRacks := strings.TrimSuffix(exampleTopology, "}") + `, "racks": {"r01": ["host-a", "host-b"], "r02": []}}`
	topo, err := ParseTopology(strings.NewReader(withRacks))
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"host-a": "r01", "host-b": "r01", "host-c": "", "nope": ""} {
		if got := topo.Rack(node); got != want {
			t.Errorf("Rack(%s) = %q, want %q", node, got, want)
		}
	}
}

func TestUnknownNodes(t *testing.T) {
	topo, err := ParseTopology(strings.NewReader(exampleTopology))
	if err != nil {
		t.Fatal(err)
	}
	got := topo.UnknownNodes([]string{"host-a", "gpu-1", "host-c", "gpu-2", "gpu-1", "leaf-01"})
	if want := []string{"gpu-1", "gpu-2", "leaf-01"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownNodes = %v, want %v", got, want)
	}
	if got := topo.UnknownNodes([]string{"host-a", "host-b"}); got != nil {
		t.Errorf("UnknownNodes of known nodes = %v", got)
	}
}

// TestTopologyHopCache: distances stay right while the cache evicts, and
// under concurrent use (go test -race).
func TestTopologyHopCache(t *testing.T) {
	ring, err := ParseTopology(strings.NewReader(ringTopology(50)))
	if err != nil {
		t.Fatal(err)
	}
	ring.hops.limit = 120 // two sources of 50 switches
	host := func(i int) PortID { return PortID{fmt.Sprintf("host-%05d", i), "mlx5_0", 1} }
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				for j := range 50 {
					a, b := (i+w)%50, (j*7)%50
					d := abs(a - b)
					d = min(d, 50-d) + 2
					if a == b {
						d = 0
					}
					if got, ok := ring.Hops(host(a), host(b)); !ok || got != d {
						t.Errorf("Hops(%d, %d) = %d %v, want %d", a, b, got, ok, d)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	ring.hops.mu.Lock()
	defer ring.hops.mu.Unlock()
	if ring.hops.entries > ring.hops.limit || len(ring.hops.bySrc) > 2 {
		t.Errorf("cache holds %d entries of %d sources, limit %d", ring.hops.entries, len(ring.hops.bySrc), ring.hops.limit)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestLoadTopology(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topo.json")
	if err := os.WriteFile(path, []byte(exampleTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTopology(path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTopology(path + ".missing"); err == nil {
		t.Fatal("missing file loaded")
	}
}

// go test ./schemas -run '^$' -fuzz FuzzParseTopology -fuzztime 30s
func FuzzParseTopology(f *testing.F) {
	f.Add(exampleTopology)
	f.Add(`{"switches":[{"name":"s","tier":"core"}],"links":[{"a":"n/d/1","b":"s/1/2/3"},{"a":"m/d/1","b":"n/d/2"}]}`)
	f.Add(`{"links":[{"a":"a/b/1","b":"c/d/2"}]}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, in string) {
		topo, err := ParseTopology(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrInvalidTopology) {
				t.Fatalf("error %v does not wrap ErrInvalidTopology", err)
			}
			return
		}
		// Every cabled host port must have a peer, and distances are symmetric.
		var hosts []PortID
		for _, l := range topo.Links {
			for _, raw := range []string{l.A, l.B} {
				ep, err := topo.ParseEndpoint(raw)
				if err != nil {
					t.Fatalf("accepted endpoint %q does not parse: %v", raw, err)
				}
				if ep.IsHost() {
					if !topo.HasPort(ep.Host) {
						t.Fatalf("host port %v not in graph", ep.Host)
					}
					hosts = append(hosts, ep.Host)
				}
			}
		}
		for _, a := range hosts {
			for _, b := range hosts {
				h1, ok1 := topo.Hops(a, b)
				h2, ok2 := topo.Hops(b, a)
				if h1 != h2 || ok1 != ok2 {
					t.Fatalf("Hops not symmetric: %v %v: %d/%v vs %d/%v", a, b, h1, ok1, h2, ok2)
				}
			}
			topo.Neighbours(a, 6)
		}
	})
}
