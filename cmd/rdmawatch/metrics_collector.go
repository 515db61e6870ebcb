package main

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
)

// registerCollectorMetrics registers the collector's metrics on reg and
// returns its OnScrape hook, which keeps them: the hook runs on the
// collector's goroutine, the metrics are read by scrapes on others.
func registerCollectorMetrics(reg prometheus.Registerer, source string) func(collector.Scrape) {
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: telemetry.Namespace, Name: "collector_scrape_duration_seconds",
		Help:        "Time to read every port of the host once.",
		ConstLabels: prometheus.Labels{"source": source},
		Buckets:     []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	errs := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "collector_scrape_errors_total",
		Help: "Readings that failed. A host without RDMA devices is not a failure: see collector_rdma_devices.", ConstLabels: prometheus.Labels{"source": source},
	})
	skipped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "collector_skipped_total",
		Help: "Ports and files the scrapes left out, by reason (not_active, no_counters, counter_unreadable, ...).",
	}, []string{"reason"})
	for _, why := range collector.SkipReasons {
		skipped.WithLabelValues(why) // served at 0 from the start
	}
	counted := map[string]uint64{} // what skipped holds per reason
	var (
		mu   sync.Mutex
		last collector.Scrape
	)
	read := func(f func(collector.Scrape) float64) func() float64 {
		return func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return f(last)
		}
	}
	reg.MustRegister(duration, errs, skipped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: telemetry.Namespace, Name: "collector_rdma_devices", Help: "RDMA devices in the last reading; 0 on a host without any (a DaemonSet's non-RDMA node), which is not an error."},
			read(func(sc collector.Scrape) float64 { return float64(sc.Devices) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: telemetry.Namespace, Name: "collector_ports", Help: "Ports in the last reading."},
			read(func(sc collector.Scrape) float64 { return float64(sc.Ports) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: telemetry.Namespace, Name: "collector_batches_published_total", Help: "Counter batches NATS acknowledged."},
			read(func(sc collector.Scrape) float64 { return float64(sc.Batches) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: telemetry.Namespace, Name: "collector_samples_published_total", Help: "Port samples the delta engine accepted for publishing."},
			read(func(sc collector.Scrape) float64 { return float64(sc.Samples) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: telemetry.Namespace, Name: "collector_spool_dropped_batches_total", Help: "Batches given up: spool full, no spool at shutdown, too large."},
			read(func(sc collector.Scrape) float64 { return float64(sc.Dropped.Messages) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: telemetry.Namespace, Name: "collector_config_errors_total", Help: "Port configuration reads that failed (a setting exposed but unreadable); it stays unknown."},
			read(func(sc collector.Scrape) float64 { return float64(sc.ConfigErrors) })),
	)
	return func(sc collector.Scrape) {
		duration.Observe(sc.Duration.Seconds())
		// No devices is what the host is, not a failure: counting it would
		// page for every node of a DaemonSet that has no RDMA card.
		if sc.Err != nil && !errors.Is(sc.Err, collector.ErrNoDevices) {
			errs.Inc()
		}
		// The source keeps totals; the counters take what is new.
		for why, n := range sc.Skipped {
			if n > counted[why] {
				skipped.WithLabelValues(why).Add(float64(n - counted[why]))
				counted[why] = n
			}
		}
		mu.Lock()
		last = sc
		mu.Unlock()
	}
}
