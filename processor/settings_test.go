package processor

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSettingsApply(t *testing.T) {
	dets, err := NewDetectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    Settings
		want string // "" = no error
	}{
		{"duration and int", Settings{"link_flap": {"stable_after": "2m", "critical_downs": "5"}}, ""},
		{"unknown detector", Settings{"link_flapp": {"stable_after": "2m"}}, `detector "link_flapp"`},
		{"unknown setting", Settings{"link_flap": {"stable_afterr": "2m"}}, "link_flap.stable_afterr"},
		{"bad duration", Settings{"link_flap": {"stable_after": "soon"}}, `link_flap.stable_after: "soon"`},
		{"negative count", Settings{"link_flap": {"critical_downs": "-1"}}, "link_flap.critical_downs"},
		{"number", Settings{"cnp_ecn_imbalance": {"min_marked": "1e3"}}, ""},
		{"NaN", Settings{"cnp_ecn_imbalance": {"min_marked": "NaN"}}, `cnp_ecn_imbalance.min_marked: "NaN": want a finite number`},
		{"+Inf", Settings{"cnp_ecn_imbalance": {"min_marked": "+Inf"}}, `cnp_ecn_imbalance.min_marked: "+Inf": want a finite number`},
		{"-Inf", Settings{"cnp_ecn_imbalance": {"min_marked": "-inf"}}, `cnp_ecn_imbalance.min_marked: "-inf": want a finite number`},
		{"Infinity", Settings{"cnp_ecn_imbalance": {"min_marked": "infinity"}}, "cnp_ecn_imbalance.min_marked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Apply(dets)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Apply: %v, want %q", err, tc.want)
			}
		})
	}
	var lf *LinkFlap
	for _, d := range dets {
		if x, ok := Unwrap(d).(*LinkFlap); ok {
			lf = x
		}
	}
	if lf == nil || lf.StableAfter != 2*time.Minute || lf.CriticalDowns != 5 {
		t.Errorf("link_flap after Apply: %+v", lf)
	}
	if err := (Settings{"x": {}}).Apply(dets); !errors.Is(err, ErrUnknownDetector) {
		t.Errorf("unknown detector error %v does not wrap ErrUnknownDetector", err)
	}
}

func TestTunablesNamesEveryDetectorsDefaults(t *testing.T) {
	dets, err := NewDetectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dets {
		tun := Tunables(d)
		if len(tun) == 0 {
			t.Errorf("%s has no tunable settings", d.Name())
		}
		for k := range tun {
			if k != strings.ToLower(k) || strings.Contains(k, "__") {
				t.Errorf("%s: setting name %q", d.Name(), k)
			}
		}
	}
	if got := snake("CNPLossNoise"); got != "cnp_loss_noise" {
		t.Errorf("snake(CNPLossNoise) = %q", got)
	}
}
