package processor

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"gpu-005":             "gpu-005",
		"gpu-005.pod-a":       "gpu-005.pod-a",
		"ibstat mlx5_0 1":     "'ibstat mlx5_0 1'",
		"grep -E 'pause|x'":   `'grep -E '\''pause|x'\'''`,
		"":                    "''",
		"$(ibdev2netdev)":     "'$(ibdev2netdev)'",
		"a;rm -rf /":          "'a;rm -rf /'",
		"node with\nnew line": "'node with\nnew line'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestChecksPasteIntoAShell: every command is valid shell syntax (bash -n)
// and, run through ssh, hands the remote side exactly the command.
func TestChecksPasteIntoAShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	id := schemas.PortID{Node: "gpu-005", Device: "mlx5_1", Port: 1}
	checks := []schemas.Check{
		OnHost(id.Node, "ethtool -S "+NetdevOf(id, "")+" | grep -E 'pause|storm'", "pauses"),
		OnHost(id.Node, "dmesg -T | grep -iE '(mlx5_1|ens2f0np0).*link'", "link"),
		OnSwitch(nil, id, "pause counters"),
	}
	for _, c := range checks {
		if c.Command == "" || c.Note == "" {
			t.Errorf("check %+v: want a command and a note", c)
		}
		if out, err := exec.Command(bash, "-n", "-c", c.Command).CombinedOutput(); err != nil {
			t.Errorf("%s: not valid shell: %v %s", c.Command, err, out)
		}
		// What ssh would run remotely: the arguments after the host.
		out, err := exec.Command(bash, "-c", "set -- "+strings.TrimPrefix(c.Command, "ssh ")+`; shift; printf %s "$*"`).Output()
		if err != nil {
			t.Fatalf("%s: %v", c.Command, err)
		}
		if !strings.Contains(string(out), "mlx5_1") && !strings.Contains(string(out), "lldptool") && !strings.Contains(string(out), "dmesg") {
			t.Errorf("%s: remote command %q lost the port", c.Command, out)
		}
	}
}

func TestOnSwitchUsesTopology(t *testing.T) {
	topo, err := schemas.ParseTopology(strings.NewReader(`{"fabric":"pod-a","switches":[{"name":"leaf-01","tier":"leaf"}],
	"links":[{"a":"gpu-005/mlx5_1/1","b":"leaf-01/swp7"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := OnSwitch(topoView{topo}, schemas.PortID{Node: "gpu-005", Device: "mlx5_1", Port: 1}, "pause counters")
	if c.Command != "ssh leaf-01 'nv show interface swp7 counters'" || !strings.Contains(c.Note, "leaf-01 port swp7") {
		t.Errorf("switch check %+v", c)
	}
}

// topoView is a FabricView with a topology and nothing tracked.
type topoView struct{ topo *schemas.Topology }

func (v topoView) Topology() *schemas.Topology          { return v.topo }
func (topoView) Watermark() schemas.Millis              { return 0 }
func (topoView) Port(schemas.PortID) (*PortState, bool) { return nil, false }
func (topoView) Ports(func(*PortState) bool)            {}
func (topoView) Complete() bool                         { return true }
