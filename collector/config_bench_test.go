//go:build linux

package collector

// What reading the configuration costs, against the scrape it rides on:
//
//	go test -run '^$' -bench '^BenchmarkConfig' -benchtime 2000x ./collector
//
// BenchmarkConfigHostScrape scrapes sysfstest.MLX5RoCE(8, 2) (16 RoCE ports,
// 16 netdevs with MLNX_OFED's ecn files) with the configuration read on no
// scrape and on every scrape; the DCB half is a real RTM_GETDCB per netdev
// (the fixture's netdevs are not in this namespace: the kernel answers
// ENODEV after the full lookup). BenchmarkConfigDCBRealNetdev is one
// RTM_GETDCB on this machine's interface.

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
)

func BenchmarkConfigHostScrape(b *testing.B) {
	root := b.TempDir()
	spec := sysfstest.MLX5RoCE(8, 2)
	for _, d := range spec.Devices {
		for _, p := range d.Ports {
			spec.Netdevs = append(spec.Netdevs, sysfstest.RoCENetdev(p.Netdevs[0], 9000, []int{3}, []int{3}))
		}
	}
	if err := sysfstest.Build(root+"/class", spec); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"config off", 0}, {"config every scrape", time.Nanosecond}} {
		b.Run(tc.name, func(b *testing.B) {
			h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithConfigInterval(tc.every),
				WithHostLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := sysfsCPUNanos()
			for b.Loop() {
				rd, err := h.Next(ctx)
				if err != nil || len(rd.Ports) != 16 {
					b.Fatalf("%v, %d ports", err, len(rd.Ports))
				}
				if (tc.every > 0) != (rd.Ports[15].Config != nil) {
					b.Fatalf("config %v with interval %v", rd.Ports[15].Config, tc.every)
				}
			}
			// Process CPU (user+sys) per scrape: wall time says little on a
			// shared machine.
			b.ReportMetric(float64(sysfsCPUNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func BenchmarkConfigDCBRealNetdev(b *testing.B) {
	netdev := ethtoolTestNetdev()
	if netdev == "" {
		b.Skip("no network interface besides lo")
	}
	ctx := context.Background()
	cpu0 := sysfsCPUNanos()
	for b.Loop() {
		if _, err := queryDCB(ctx, netdev); err != nil && !isNotExposed(err) {
			b.Fatal(fmt.Errorf("RTM_GETDCB %s: %w", netdev, err))
		}
	}
	b.ReportMetric(float64(sysfsCPUNanos()-cpu0)/float64(b.N), "cpu-ns/op")
}
