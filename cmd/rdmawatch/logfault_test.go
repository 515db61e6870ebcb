//go:build !fleet

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/sim"
)

// TestLogFault: a scheduled fault of the simulated fleet (the lab build
// only) logs as its kind and settings, without Go's type names or padding.
func TestLogFault(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fault         sim.Fault
		want, wantNot string
	}{
		{"without words: its kind and settings", sim.ConfigReport{MTU: 9000}, `fault="config_report {MTU:9000 Priority:0}"`, "sim.ConfigReport"},
		{"without padding", sim.LinkFlap{Port: sim.PortRef{Node: "n1", Device: "mlx5_0", Port: 1}}, `fault="link_flap `, "  "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			l, err := newLogger(&b, "text", slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			l.Info("fault scheduled", "fault", logFault(tc.fault, time.Time{}))
			line := b.String()
			if !strings.Contains(line, tc.want) {
				t.Errorf("%s: want %q", line, tc.want)
			}
			if strings.Contains(line, tc.wantNot) {
				t.Errorf("%s: want no %q", line, tc.wantNot)
			}
		})
	}
}
