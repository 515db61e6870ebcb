package sim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestMisconfig: the misconfigured port's lines show the changed setting
// from its label's start to its end and the fabric's outside; a host that
// reports on change only repeats nothing; NP and RP off come with the
// cnp_ecn_imbalance they cause, labelled with it as cause; a fleet without
// ConfigReport or Misconfig reports no config.
func TestMisconfig(t *testing.T) {
	s := misconfigScenario()
	lines, labels, _ := generate(t, s.Config)
	byType := map[string]int{}
	var mtu *Label
	for i := range labels {
		l := &labels[i]
		byType[l.Type]++
		if l.Type == schemas.TypeCNPECNImbalance && (l.Cause == nil || l.Cause.Type != "config_mismatch" || l.Cause.Subject != l.Subject) {
			t.Errorf("cnp_ecn_imbalance label without its cause: %+v", l)
		}
		if l.Type == "config_mismatch" && l.Subject.Node == "gpu-002" {
			mtu = l
		}
	}
	if byType["config_mismatch"] != 4 || byType[schemas.TypeCNPECNImbalance] != 2 || mtu == nil || mtu.End == nil {
		t.Fatalf("labels %v", byType)
	}
	reported := map[PortRef][]string{}
	seen := 0
	for i, l := range lines {
		if l.Kind != KindSample || l.Config == nil {
			continue
		}
		seen++
		var c schemas.PortConfig
		if err := json.Unmarshal(l.Config, &c); err != nil {
			t.Fatalf("line %d: config %s: %v", i+1, l.Config, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		reported[l.ref()] = append(reported[l.ref()], string(l.Config))
		if l.ref() == (PortRef{"gpu-002", "mlx5_0", 1}) {
			at := schemas.MillisOf(l.time)
			want := 4200
			if at >= mtu.Start && at < *mtu.End {
				want = 1500
			}
			if c.MTU == nil || *c.MTU != want {
				t.Errorf("line %d at %v: gpu-002's MTU %v, want %d", i+1, at, c.MTU, want)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no line carries a config")
	}
	onChange := 0
	for _, cs := range reported {
		if len(cs) <= 3 {
			onChange++
			for i := 1; i < len(cs); i++ {
				if cs[i] == cs[i-1] {
					t.Errorf("a host reporting on change repeated %s", cs[i])
				}
			}
		}
	}
	if onChange == 0 {
		t.Error("no host reports its config on change only")
	}

	plain := s.Config
	plain.Faults = []Fault{LinkFlap{Port: PortRef{"gpu-001", "mlx5_0", 1}, At: scenarioStart.Add(time.Minute)}}
	plain.Duration = 3 * time.Minute
	plainLines, _, _ := generate(t, plain)
	for i, l := range plainLines {
		if l.Config != nil {
			t.Fatalf("line %d: config in a fleet that reports none", i+1)
		}
	}
}
