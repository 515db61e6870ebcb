package processor_test

import (
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
)

func TestSettingsApply(t *testing.T) {
	dets, err := processor.NewDetectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    processor.Settings
		want string // "" = no error
	}{
		{"duration and int", processor.Settings{"link_flap": {"stable_after": "2m", "critical_downs": "5"}}, ""},
		{"unknown detector", processor.Settings{"link_flapp": {"stable_after": "2m"}}, `detector "link_flapp"`},
		{"unknown setting", processor.Settings{"link_flap": {"stable_afterr": "2m"}}, "link_flap.stable_afterr"},
		{"bad duration", processor.Settings{"link_flap": {"stable_after": "soon"}}, `link_flap.stable_after: "soon"`},
		{"negative count", processor.Settings{"link_flap": {"critical_downs": "-1"}}, "link_flap.critical_downs"},
		{"number", processor.Settings{"cnp_ecn_imbalance": {"min_marked": "1e3"}}, ""},
		{"NaN", processor.Settings{"cnp_ecn_imbalance": {"min_marked": "NaN"}}, `cnp_ecn_imbalance.min_marked: "NaN": want a finite number`},
		{"+Inf", processor.Settings{"cnp_ecn_imbalance": {"min_marked": "+Inf"}}, `cnp_ecn_imbalance.min_marked: "+Inf": want a finite number`},
		{"-Inf", processor.Settings{"cnp_ecn_imbalance": {"min_marked": "-inf"}}, `cnp_ecn_imbalance.min_marked: "-inf": want a finite number`},
		{"Infinity", processor.Settings{"cnp_ecn_imbalance": {"min_marked": "infinity"}}, "cnp_ecn_imbalance.min_marked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Apply(dets)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Apply: %v, want %q", err, tc.want)
			}
		})
	}
	var lf *linkflap.Detector
	for _, d := range dets {
		if x, ok := processor.Unwrap(d).(*linkflap.Detector); ok {
			lf = x
		}
	}
	if lf == nil || lf.StableAfter != 2*time.Minute || lf.CriticalDowns != 5 {
		t.Errorf("link_flap after Apply: %+v", lf)
	}
	if err := (processor.Settings{"x": {}}).Apply(dets); !errors.Is(err, processor.ErrUnknownDetector) {
		t.Errorf("unknown detector error %v does not wrap ErrUnknownDetector", err)
	}
}

func TestTunablesNamesEveryDetectorsDefaults(t *testing.T) {
	dets, err := processor.NewDetectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dets {
		tun := processor.Tunables(d)
		if len(tun) == 0 {
			t.Errorf("%s has no tunable settings", d.Name())
		}
		for k := range tun {
			if k != strings.ToLower(k) || strings.Contains(k, "__") {
				t.Errorf("%s: setting name %q", d.Name(), k)
			}
		}
	}
	if got := processor.Snake("CNPLossNoise"); got != "cnp_loss_noise" {
		t.Errorf("snake(CNPLossNoise) = %q", got)
	}
}

// TestTunablesGolden pins every detector's settings and defaults: the keys a
// configuration file's processor.detectors section (and `rdmawatch config
// print processor`) uses. Moving a detector, renaming a field or embedding
// a struct differently must not change them; a deliberate change edits
// testdata/tunables.golden with it.
func TestTunablesGolden(t *testing.T) {
	dets, err := processor.NewDetectors()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range dets {
		tun := processor.Tunables(d)
		keys := make([]string, 0, len(tun))
		for k := range tun {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			got = append(got, d.Name()+"."+k+"="+tun[k])
		}
	}
	b, err := os.ReadFile("testdata/tunables.golden")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("detector settings differ from testdata/tunables.golden:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
