package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// tableStreams maps the sink's tables to the streams they come from.
var tableStreams = map[string]string{"port_samples": schemas.StreamCounters, "events": schemas.StreamEvents, "inventory": schemas.StreamInventory, "port_config": schemas.StreamInventory}

// sinkInsertObserver registers the insert latency histogram on reg and
// returns the hook for sink.Config.ObserveInsert that fills it.
func sinkInsertObserver(reg prometheus.Registerer) func(table string, rows int, took time.Duration, err error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: telemetry.Namespace, Name: "sink_insert_duration_seconds",
		Help:    "One INSERT block, successful or not.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"table"})
	reg.MustRegister(latency)
	return func(table string, _ int, took time.Duration, _ error) {
		latency.WithLabelValues(table).Observe(took.Seconds())
	}
}

// registerSinkMetrics exports a sink's Stats on reg.
func registerSinkMetrics(reg prometheus.Registerer, stats func() sink.Stats) {
	var (
		rows    = telemetry.Desc("sink_rows_inserted_total", "Rows ClickHouse accepted.", "table")
		retries = telemetry.Desc("sink_insert_retries_total", "Flushes that failed and were tried again.", "table")
		errs    = telemetry.Desc("sink_insert_errors_total", "INSERT attempts that failed.", "table")
		pending = telemetry.Desc("sink_pending_messages", "Messages fetched and not acknowledged yet.", "stream")
		backlog = telemetry.Desc("sink_consumer_pending", "Messages the table's durable consumer has not delivered yet (JetStream num_pending), shared by every sink.", "table")
		poison  = telemetry.Desc("sink_poison_messages_total", "Messages that did not decode or named another node than their subject.", "stream")
		dups    = telemetry.Desc("sink_duplicate_rows_total", "Rows of redelivered messages skipped because the table had them.", "table")
	)
	reg.MustRegister(telemetry.Snapshot(
		[]*prometheus.Desc{rows, retries, errs, pending, backlog, poison, dups, telemetry.DeadLetters},
		func(ch chan<- prometheus.Metric) {
			// Two tables read one stream (inventory and port_config): the
			// stream's series sum them, one series per stream.
			type perStream struct{ pending, poison, dead uint64 }
			streams := map[string]*perStream{}
			for table, st := range stats() {
				ch <- prometheus.MustNewConstMetric(rows, prometheus.CounterValue, float64(st.Rows), table)
				ch <- prometheus.MustNewConstMetric(retries, prometheus.CounterValue, float64(st.Retries), table)
				ch <- prometheus.MustNewConstMetric(errs, prometheus.CounterValue, float64(st.InsertErrors), table)
				ch <- prometheus.MustNewConstMetric(dups, prometheus.CounterValue, float64(st.DuplicateRows), table)
				ch <- prometheus.MustNewConstMetric(backlog, prometheus.GaugeValue, float64(st.ConsumerPending), table)
				ps := streams[tableStreams[table]]
				if ps == nil {
					ps = &perStream{}
					streams[tableStreams[table]] = ps
				}
				ps.pending += uint64(st.Pending)
				ps.poison += st.Poison + st.Spoofed
				ps.dead += st.DeadLettered
			}
			for stream, ps := range streams {
				ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(ps.pending), stream)
				ch <- prometheus.MustNewConstMetric(poison, prometheus.CounterValue, float64(ps.poison), stream)
				ch <- prometheus.MustNewConstMetric(telemetry.DeadLetters, prometheus.CounterValue, float64(ps.dead), "sink", stream)
			}
		},
	))
}

// registerSinkRollupMetrics exports what a sink's roller did on reg:
// rolls, failed rolls and the minutes or hours waiting, by rollup (minute,
// hour).
func registerSinkRollupMetrics(reg prometheus.Registerer, stats func() map[string]sink.RollupStats) {
	var (
		rolls   = telemetry.Desc("sink_rollups_total", "Rolls (one INSERT ... SELECT of a run of minutes or hours) that succeeded.", "rollup")
		fails   = telemetry.Desc("sink_rollup_failures_total", "Rolls that failed; they are tried again at the next tick.", "rollup")
		pending = telemetry.Desc("sink_rollup_pending", "Minutes or hours with stored samples not rolled yet.", "rollup")
	)
	reg.MustRegister(telemetry.Snapshot(
		[]*prometheus.Desc{rolls, fails, pending},
		func(ch chan<- prometheus.Metric) {
			for name, st := range stats() {
				ch <- prometheus.MustNewConstMetric(rolls, prometheus.CounterValue, float64(st.Rolls), name)
				ch <- prometheus.MustNewConstMetric(fails, prometheus.CounterValue, float64(st.Failures), name)
				ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(st.Pending), name)
			}
		},
	))
}
