package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/internal/telemetry/telemetrytest"
)

// TestCollectorMetrics: a host without RDMA devices is a gauge at 0, not a
// scrape error, and skipped ports and files are counted by reason.
func TestCollectorMetrics(t *testing.T) {
	noDevices := fmt.Errorf("%w under /sys/class/infiniband", collector.ErrNoDevices)
	for _, tc := range []struct {
		name    string
		scrapes []collector.Scrape
		want    []string // lines of /metrics
	}{
		{name: "no devices, every scrape",
			scrapes: []collector.Scrape{{Err: noDevices}, {Err: noDevices}, {Err: noDevices}},
			want: []string{
				`rdmawatch_collector_scrape_errors_total{source="sysfs"} 0`,
				`rdmawatch_collector_rdma_devices 0`,
			}},
		{name: "a failing scrape still counts",
			scrapes: []collector.Scrape{{Devices: 2, Ports: 2}, {Err: errors.New("sysfs scrape stopped")}},
			want: []string{
				`rdmawatch_collector_scrape_errors_total{source="sysfs"} 1`,
			}},
		{name: "devices found",
			scrapes: []collector.Scrape{{Err: noDevices}, {Devices: 2, Ports: 3}},
			want: []string{
				`rdmawatch_collector_scrape_errors_total{source="sysfs"} 0`,
				`rdmawatch_collector_rdma_devices 2`,
				`rdmawatch_collector_ports 3`,
			}},
		{name: "skipped ports and files by reason",
			scrapes: []collector.Scrape{
				{Devices: 1, Skipped: map[string]uint64{collector.SkipNotActive: 1}},
				{Devices: 1, Skipped: map[string]uint64{collector.SkipNotActive: 2, collector.SkipCounterUnreadable: 3}},
				{Devices: 1, Skipped: map[string]uint64{collector.SkipNotActive: 2, collector.SkipCounterUnreadable: 3}},
			},
			want: []string{
				`rdmawatch_collector_skipped_total{reason="not_active"} 2`,
				`rdmawatch_collector_skipped_total{reason="counter_unreadable"} 3`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := telemetry.New("collector", "dev", nil)
			hook := registerCollectorMetrics(s.Registry(), "sysfs")
			for _, sc := range tc.scrapes {
				hook(sc)
			}
			_, body := telemetrytest.Get(t, s.Handler(), "/metrics")
			for _, w := range tc.want {
				if !strings.Contains(body, w+"\n") {
					t.Errorf("missing %s in\n%s", w, grepMetrics(body, "rdmawatch_collector_"))
				}
			}
			telemetrytest.CheckWithPromtool(t, s.Handler())
		})
	}
}

func grepMetrics(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
