package sysfstest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const capturePath = "../../test/fixtures/mlx-sysfs-capture.txt"

func TestParseCaptureLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    CaptureLine
		wantErr string
	}{
		{name: "blank", line: "   "},
		{name: "comment", line: "# Real sysfs readings"},
		{name: "device file", line: "mlx5_0/fw_ver = 14.28.2006",
			want: CaptureLine{Device: "mlx5_0", Name: "fw_ver", Value: "14.28.2006"}},
		{name: "node guid keeps colons", line: "mlx5_0/node_guid = 0a7f:bc12:45ef:d23b",
			want: CaptureLine{Device: "mlx5_0", Name: "node_guid", Value: "0a7f:bc12:45ef:d23b"}},
		{name: "port file with spaces in value", line: "mlx4_0/ports/1/rate = 40 Gb/sec (4X QDR)",
			want: CaptureLine{Device: "mlx4_0", Port: 1, Name: "rate", Value: "40 Gb/sec (4X QDR)"}},
		{name: "state", line: "mlx4_0/ports/2/state = 4: ACTIVE",
			want: CaptureLine{Device: "mlx4_0", Port: 2, Name: "state", Value: "4: ACTIVE"}},
		{name: "literal newline escape", line: `mlx4_0/ports/2/link_layer = InfiniBand\n`,
			want: CaptureLine{Device: "mlx4_0", Port: 2, Name: "link_layer", Value: "InfiniBand"}},
		{name: "two literal newline escapes", line: `mlx4_0/ports/2/link_layer = InfiniBand\n\n`,
			want: CaptureLine{Device: "mlx4_0", Port: 2, Name: "link_layer", Value: "InfiniBand"}},
		{name: "counter", line: "mlx5_0/ports/1/counters/port_xmit_data = 2880761508848",
			want: CaptureLine{Device: "mlx5_0", Port: 1, Set: Counters, Name: "port_xmit_data", Value: "2880761508848"}},
		{name: "hw counter", line: "mlx5_0/ports/1/hw_counters/lifespan = 10",
			want: CaptureLine{Device: "mlx5_0", Port: 1, Set: HWCounters, Name: "lifespan", Value: "10"}},
		{name: "ndev", line: "mlx5_1/ports/1/gid_attrs/ndevs/0 = ens1f0np0",
			want: CaptureLine{Device: "mlx5_1", Port: 1, Name: "gid_attrs/ndevs/0", Value: "ens1f0np0"}},
		{name: "empty value", line: "mlx5_1/ports/1/gid_attrs/ndevs/3 =",
			want: CaptureLine{Device: "mlx5_1", Port: 1, Name: "gid_attrs/ndevs/3"}},
		{name: "no separator", line: "mlx5_0/fw_ver 14.28", wantErr: "is not \"path = content\""},
		{name: "escape", line: "mlx5_0/../../etc/passwd = x", wantErr: "is not a file name"},
		{name: "absolute", line: "/mlx5_0/fw_ver = x", wantErr: "is not a file name"},
		{name: "port zero", line: "mlx5_0/ports/0/state = 4: ACTIVE", wantErr: "not a number from 1"},
		{name: "port name", line: "mlx5_0/ports/x/state = 4: ACTIVE", wantErr: "not a number from 1"},
		{name: "too deep", line: "mlx5_0/ports/1/counters/a/b = 1", wantErr: "is not <dev>/<file>"},
		{name: "counters as file", line: "mlx5_0/ports/1/counters = 1", wantErr: "is not <dev>/<file>"},
		{name: "bare ports", line: "mlx5_0/ports = 1", wantErr: "is not <dev>/<file>"},
		{name: "gid index too large", line: "mlx5_0/ports/1/gid_attrs/ndevs/300 = eth0", wantErr: "GID index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCaptureLine(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseCaptureLine(%q) error = %v, want one containing %q", tc.line, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCaptureLine(%q): %v", tc.line, err)
			}
			if got != tc.want {
				t.Fatalf("ParseCaptureLine(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
		})
	}
}

// FuzzParseCaptureLine checks that the parser never panics and never
// returns a path that Build would write outside its tree.
func FuzzParseCaptureLine(f *testing.F) {
	for _, s := range []string{
		"mlx5_0/fw_ver = 14.28.2006",
		`mlx4_0/ports/2/link_layer = InfiniBand\n`,
		"mlx5_0/ports/1/hw_counters/lifespan = 10",
		"mlx5_1/ports/1/gid_attrs/ndevs/0 = ens1f0np0",
		"# comment",
		"a/ports/1/b =",
		"../x = 1",
		" = ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseCaptureLine(s)
		if err != nil {
			return
		}
		if l.Device == "" {
			if l != (CaptureLine{}) {
				t.Fatalf("%q: no device but %+v", s, l)
			}
			return
		}
		if checkName(l.Device) != nil {
			t.Fatalf("%q: device %q escapes the tree", s, l.Device)
		}
		for _, part := range strings.Split(l.Name, "/") {
			if checkName(part) != nil {
				t.Fatalf("%q: name %q escapes the tree", s, l.Name)
			}
		}
		if l.Port < 0 || strings.HasSuffix(l.Value, `\n`) {
			t.Fatalf("%q: bad parse %+v", s, l)
		}
		// The parsed line must build.
		var spec Spec
		spec.add(l)
		if err := Build(t.TempDir(), spec); err != nil {
			t.Fatalf("%q: parsed as %+v but does not build: %v", s, l, err)
		}
	})
}

func TestFromCapture(t *testing.T) {
	spec, err := FromCapture(capturePath)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Devices) != 2 || spec.Devices[0].Name != "mlx4_0" || spec.Devices[1].Name != "mlx5_0" {
		t.Fatalf("devices = %+v, want mlx4_0 and mlx5_0", spec.Devices)
	}
	mlx4 := spec.Device("mlx4_0")
	if len(mlx4.Ports) != 2 {
		t.Fatalf("mlx4_0 has %d ports, want 2", len(mlx4.Ports))
	}
	if got := mlx4.Port(2).Files["link_layer"]; got != "InfiniBand" {
		t.Errorf(`mlx4_0 port 2 link_layer = %q, want "InfiniBand" (literal \n dropped)`, got)
	}
	if mlx4.Port(1).HWCounters != nil {
		t.Errorf("mlx4_0 port 1 has hw_counters %v; the capture has none", mlx4.Port(1).HWCounters)
	}
	if got := mlx4.Files["fw_ver"]; got != "2.31.5050" {
		t.Errorf("mlx4_0 fw_ver = %q", got)
	}
	mlx5 := spec.Device("mlx5_0")
	p := mlx5.Port(1)
	if len(p.Counters) != 21 || len(p.HWCounters) != 25 {
		t.Errorf("mlx5_0 port 1: %d counters, %d hw_counters; want 21 and 25", len(p.Counters), len(p.HWCounters))
	}
	if p.Counters["port_xmit_data"] != "2880761508848" || p.HWCounters["lifespan"] != "10" {
		t.Errorf("mlx5_0 port 1 port_xmit_data = %q, lifespan = %q", p.Counters["port_xmit_data"], p.HWCounters["lifespan"])
	}
	if _, err := FromCapture(filepath.Join(t.TempDir(), "none.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing capture: err = %v, want fs.ErrNotExist", err)
	}
}

func TestParseCaptureErrorNamesLine(t *testing.T) {
	_, err := ParseCapture(strings.NewReader("# c\nmlx5_0/fw_ver = 1\nbroken\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want one naming line 3", err)
	}
}

func TestBuild(t *testing.T) {
	spec, err := FromCapture(capturePath)
	if err != nil {
		t.Fatal(err)
	}
	spec.Devices[1].Ports[0].Netdevs = []string{"", "ib0"}
	dir := t.TempDir()
	if err := Build(dir, spec); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"mlx4_0", "mlx5_0"} {
		fi, err := os.Lstat(filepath.Join(dir, "infiniband", dev))
		if err != nil {
			t.Fatal(err)
		}
		// rdmamap lists only non-directories: a plain directory would hide
		// the device.
		if fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("infiniband/%s is %v, want a symlink", dev, fi.Mode())
		}
		target, _ := os.Readlink(filepath.Join(dir, "infiniband", dev))
		if filepath.IsAbs(target) {
			t.Errorf("infiniband/%s -> %s: want a relative link so the tree can be bind-mounted", dev, target)
		}
	}
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "infiniband", rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("mlx4_0/ports/2/link_layer"); got != "InfiniBand\n" {
		t.Errorf("link_layer = %q", got)
	}
	if got := read("mlx5_0/ports/1/counters/port_xmit_data"); got != "2880761508848\n" {
		t.Errorf("port_xmit_data = %q", got)
	}
	if got := read("mlx5_0/ports/1/gid_attrs/ndevs/1"); got != "ib0\n" {
		t.Errorf("ndevs/1 = %q", got)
	}
	if got := read("mlx5_0/ports/1/gid_attrs/ndevs/0"); got != "" {
		t.Errorf("ndevs/0 = %q, want empty", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "infiniband", "mlx4_0/ports/1/hw_counters")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("mlx4_0 port 1 hw_counters: err = %v, want it absent", err)
	}

	// Updating in place.
	if err := SetCounter(dir, "mlx5_0", 1, HWCounters, "out_of_sequence", 42); err != nil {
		t.Fatal(err)
	}
	if got := read("mlx5_0/ports/1/hw_counters/out_of_sequence"); got != "42\n" {
		t.Errorf("after SetCounter: %q", got)
	}
	if err := SetPortFile(dir, "mlx4_0", 1, "state", "1: DOWN"); err != nil {
		t.Fatal(err)
	}
	if got := read("mlx4_0/ports/1/state"); got != "1: DOWN\n" {
		t.Errorf("after SetPortFile: %q", got)
	}
	// No temporary file may be left where a reader would list it.
	ents, _ := os.ReadDir(filepath.Join(dir, "infiniband", "mlx5_0/ports/1/hw_counters"))
	if len(ents) != 25 {
		t.Errorf("hw_counters holds %d entries after SetCounter, want 25", len(ents))
	}

	// Breaking.
	if err := BreakCounter(dir, "mlx5_0", 1, Counters, "symbol_error", Remove); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(CounterPath(dir, "mlx5_0", 1, Counters, "symbol_error")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed counter: %v", err)
	}
	if err := BreakCounter(dir, "mlx5_0", 1, Counters, "port_rcv_errors", ReplaceWithDir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(CounterPath(dir, "mlx5_0", 1, Counters, "port_rcv_errors")); err != nil || !fi.IsDir() {
		t.Errorf("replaced counter: %v, %v", fi, err)
	}
	if err := BreakCounter(dir, "mlx5_0", 1, Counters, "link_downed", Garble); err != nil {
		t.Fatal(err)
	}
	if got := read("mlx5_0/ports/1/counters/link_downed"); got != "N/A (no PMA)\n" {
		t.Errorf("garbled counter: %q", got)
	}
	if err := BreakCounter(dir, "mlx5_0", 1, Counters, "nope", Remove); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("breaking a missing counter: err = %v, want one naming it", err)
	}
}

func TestBuildRejectsEscapingNames(t *testing.T) {
	for _, spec := range []Spec{
		{Devices: []Device{{Name: "../x"}}},
		{Devices: []Device{{Name: "d", Files: map[string]string{"../../x": "1"}}}},
		{Devices: []Device{{Name: "d", Ports: []Port{{Num: 1, Counters: map[string]string{"a/b": "1"}}}}}},
		{Devices: []Device{{Name: "d", Ports: []Port{{Num: 0}}}}},
	} {
		if err := Build(t.TempDir(), spec); err == nil {
			t.Errorf("Build(%+v) succeeded, want an error", spec)
		}
	}
}

func TestMLX5RoCE(t *testing.T) {
	spec := MLX5RoCE(8, 2)
	if len(spec.Devices) != 8 {
		t.Fatalf("%d devices, want 8", len(spec.Devices))
	}
	seen := map[string]bool{}
	for _, d := range spec.Devices {
		if len(d.Ports) != 2 {
			t.Fatalf("%s: %d ports", d.Name, len(d.Ports))
		}
		for _, p := range d.Ports {
			for _, name := range []string{"np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled",
				"out_of_buffer", "out_of_sequence", "lifespan"} {
				if _, ok := p.HWCounters[name]; !ok {
					t.Errorf("%s/%d: no hw_counters/%s", d.Name, p.Num, name)
				}
			}
			if p.Files["link_layer"] != "Ethernet" || len(p.Netdevs) == 0 || seen[p.Netdevs[0]] {
				t.Errorf("%s/%d: link_layer %q, netdevs %v (must be unique)", d.Name, p.Num, p.Files["link_layer"], p.Netdevs)
			}
			if len(p.Netdevs) > 0 {
				seen[p.Netdevs[0]] = true
				if len(p.Netdevs[0]) > 15 {
					t.Errorf("netdev %q longer than IFNAMSIZ-1", p.Netdevs[0])
				}
			}
		}
	}
	if err := Build(t.TempDir(), spec); err != nil {
		t.Fatal(err)
	}
	// Clone is deep.
	c := spec.Clone()
	c.Devices[0].Ports[0].Counters["symbol_error"] = "999"
	if spec.Devices[0].Ports[0].Counters["symbol_error"] == "999" {
		t.Error("Clone shares counter maps")
	}
}

func TestBuildNetdevs(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Netdevs: []Netdev{RoCENetdev("ens1f0np0", 9000, []int{3}, []int{}), RoCENetdev("eth9", 1500, nil, nil)}}
	if err := Build(dir, spec); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"net/ens1f0np0/mtu":                  "9000\n",
		"net/ens1f0np0/ecn/roce_np/enable/3": "1\n",
		"net/ens1f0np0/ecn/roce_np/enable/0": "0\n",
		"net/ens1f0np0/ecn/roce_rp/enable/3": "0\n",
		"net/eth9/mtu":                       "1500\n",
	} {
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "net/eth9/ecn")); !os.IsNotExist(err) {
		t.Errorf("upstream-like netdev has an ecn directory: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "net/eth9")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("net/eth9 is not a symlink: %v %v", fi, err)
	}
	c := spec.Clone()
	c.Netdevs[0].ECNNP[3] = "0"
	c.Netdevs[0].Files["mtu"] = "1"
	if spec.Netdevs[0].ECNNP[3] != "1" || spec.Netdevs[0].Files["mtu"] != "9000" {
		t.Error("Clone shares the netdevs' maps")
	}
	if err := Build(t.TempDir(), Spec{Netdevs: []Netdev{{Name: "../x"}}}); err == nil {
		t.Error("a netdev name escaping the tree was accepted")
	}
}
