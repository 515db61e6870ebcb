package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseFault: fault specs arrive over NATS (rdmawatch.sim.inject), so
// anything must give a fault or an ErrInvalidFault that quotes the spec,
// never a panic.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"pfc_storm@+2m:gpu-007/mlx5_0/1", "link_flap@+30s,5s:gpu-001/mlx5_1/2",
		"ber_drift@2026-03-14T00:10:00Z,40m:gpu-002/mlx5_0/1", "x@:", "@+1m:a/b/0", "pfc_storm@+-1m:a/b/1", ""} {
		f.Add(s)
	}
	base := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string) {
		fault, err := ParseFault(spec, base)
		if err != nil {
			if !errors.Is(err, ErrInvalidFault) && !strings.Contains(err.Error(), "port") {
				t.Fatalf("ParseFault(%q): %v, not an ErrInvalidFault", spec, err)
			}
			return
		}
		if fault == nil {
			t.Fatalf("ParseFault(%q): nil fault without an error", spec)
		}
	})
}

// FuzzParsePortRef: a port reference is NODE/DEVICE/PORT with a port from 1.
func FuzzParsePortRef(f *testing.F) {
	for _, s := range []string{"gpu-007/mlx5_0/1", "a/b/0", "a/b", "a//1", "/b/1", "a/b/99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParsePortRef(s)
		if err != nil {
			if !strings.Contains(err.Error(), "port") {
				t.Fatalf("ParsePortRef(%q): %v does not say what it wanted", s, err)
			}
			return
		}
		if ref.Port < 1 {
			t.Fatalf("ParsePortRef(%q) = %+v: port below 1", s, ref)
		}
	})
}

// TestParseFaultKinds: every kind FaultKinds lists parses into a fault, the
// config_* kinds into the Misconfig of their setting with the default length.
func TestParseFaultKinds(t *testing.T) {
	base := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	for kind := range FaultKinds {
		if _, err := ParseFault(kind+"@+1m:gpu-001/mlx5_0/1", base); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
	for _, tc := range []struct {
		spec string
		want Misconfig
	}{
		{"config_ecn_np_off@+1m:gpu-001/mlx5_0/1", Misconfig{Kind: MisconfigNPOff, Port: PortRef{"gpu-001", "mlx5_0", 1}, From: base.Add(time.Minute), Duration: 10 * time.Minute}},
		{"config_mtu@+2m,3m:gpu-002/mlx5_1/1", Misconfig{Kind: MisconfigMTU, Port: PortRef{"gpu-002", "mlx5_1", 1}, From: base.Add(2 * time.Minute), Duration: 3 * time.Minute}},
	} {
		got, err := ParseFault(tc.spec, base)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.spec, got, tc.want)
		}
	}
}
