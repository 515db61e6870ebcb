package collector

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
)

// TestHostSkippedCounted: ports and files a scrape leaves out are counted
// by reason across scrapes (rdmawatch_collector_skipped_total), not only
// logged at debug; a host without devices is ErrNoDevices with nothing
// counted as skipped.
func TestHostSkippedCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spec      func() sysfstest.Spec
		scrapes   int
		noDevices bool
		want      map[string]uint64
	}{
		{name: "no devices", spec: func() sysfstest.Spec { return sysfstest.Spec{} }, scrapes: 3, noDevices: true, want: nil},
		{name: "all read", spec: func() sysfstest.Spec { return sysfstest.MLX5RoCE(1, 2) }, scrapes: 2, want: nil},
		{name: "a port down, a counter garbled, no rate", spec: func() sysfstest.Spec {
			s := sysfstest.MLX5RoCE(1, 2)
			s.Device("mlx5_0").Port(2).Files["state"] = "1: DOWN"
			p1 := s.Device("mlx5_0").Port(1)
			p1.Counters["port_rcv_errors"] = "many"
			delete(p1.Files, "rate")
			return s
		}, scrapes: 2, want: map[string]uint64{SkipNotActive: 2, SkipCounterNotANumber: 2, SkipRateUnreadable: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := sysfstest.Build(filepath.Join(root, "class"), tc.spec()); err != nil {
				t.Fatal(err)
			}
			h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithConfigInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			for range tc.scrapes {
				_, err := h.Next(context.Background())
				if got := errors.Is(err, ErrNoDevices); got != tc.noDevices || (err != nil && !tc.noDevices) {
					t.Fatalf("Next: %v, want ErrNoDevices %v", err, tc.noDevices)
				}
			}
			if got := h.Skipped(); !maps.Equal(got, tc.want) {
				t.Errorf("Skipped() = %v, want %v", got, tc.want)
			}
		})
	}
}
