package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// registerAlertMetrics exports an alert bridge's Stats on reg.
func registerAlertMetrics(reg prometheus.Registerer, stats func() alert.Stats) {
	deliveries := telemetry.Desc("alert_deliveries_total", "Delivery attempts of incident state changes, by receiver and result (ok, error).", "receiver", "result")
	open := telemetry.Desc("alert_incidents_open", "Open incidents the bridge keeps firing in Alertmanager.")
	reg.MustRegister(telemetry.Snapshot(
		[]*prometheus.Desc{deliveries, open, telemetry.DeadLetters},
		func(ch chan<- prometheus.Metric) {
			st := stats()
			var dead uint64
			for name, n := range st.Delivered {
				ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(n), name, "ok")
				ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(st.Failures[name]), name, "error")
				dead += st.DeadLetters[name]
			}
			ch <- prometheus.MustNewConstMetric(open, prometheus.GaugeValue, float64(st.Open))
			ch <- prometheus.MustNewConstMetric(telemetry.DeadLetters, prometheus.CounterValue, float64(dead), "alert", schemas.StreamEvents)
		},
	))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "alert_incidents_refused_total",
		Help: "Incident state changes not held toward Alertmanager because --max-open-incidents incidents were open (each dead-lettered, or skipped in the history read at start).",
	}, func() float64 { return float64(stats().Refused) }))
}
