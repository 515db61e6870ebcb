package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// RegisterAlert exports an alert bridge's Stats.
func (s *Server) RegisterAlert(stats func() alert.Stats) {
	deliveries := desc("alert_deliveries_total", "Delivery attempts of incident state changes, by receiver and result (ok, error).", "receiver", "result")
	open := desc("alert_incidents_open", "Open incidents the bridge keeps firing in Alertmanager.")
	s.reg.MustRegister(&snapshotCollector{
		descs: []*prometheus.Desc{deliveries, open, deadLetters},
		collect: func(ch chan<- prometheus.Metric) {
			st := stats()
			var dead uint64
			for name, n := range st.Delivered {
				ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(n), name, "ok")
				ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(st.Failures[name]), name, "error")
				dead += st.DeadLetters[name]
			}
			ch <- prometheus.MustNewConstMetric(open, prometheus.GaugeValue, float64(st.Open))
			ch <- prometheus.MustNewConstMetric(deadLetters, prometheus.CounterValue, float64(dead), "alert", schemas.StreamEvents)
		},
	})
}
