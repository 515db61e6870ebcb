package main

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// registerProcessorMetrics exports a processor's Stats and the partition
// count of the counters stream it read at start on reg.
func registerProcessorMetrics(reg prometheus.Registerer, stats func() engine.Stats, streamPartitions int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: telemetry.Namespace, Name: "processor_stream_partitions",
		Help: "Partitions of the counters stream; the processors' partitions_owned sum to it when every partition has an owner.",
	}, func() float64 { return float64(streamPartitions) }))
	var (
		processed  = telemetry.Desc("processor_samples_processed_total", "Port samples accepted from each owned partition.", "partition")
		refused    = telemetry.Desc("processor_samples_refused_total", "Samples or messages refused, by reason (implausible_time, node_mismatch, decode, stale, ports_per_node).", "reason")
		lag        = telemetry.Desc("processor_lag_seconds", "Wall clock minus the newest data time consumed, per partition.", "partition")
		watermark  = telemetry.Desc("processor_watermark_timestamp_seconds", "The processor's watermark (data time) as seen by each partition.", "partition")
		decided    = telemetry.Desc("processor_events_published_total", "Incident state changes decided, by type and state.", "type", "state")
		open       = telemetry.Desc("processor_incidents_open", "Incidents open now, by type.", "type")
		owned      = telemetry.Desc("processor_partitions_owned", "Partitions of the counters stream this instance consumes.")
		trackedPts = telemetry.Desc("processor_ports", "Ports whose windows this instance keeps.")
	)
	reg.MustRegister(telemetry.Snapshot(
		[]*prometheus.Desc{processed, refused, lag, watermark, decided, open, owned, trackedPts, telemetry.DeadLetters},
		func(ch chan<- prometheus.Metric) {
			st := stats()
			for _, p := range st.Partitions {
				part := strconv.Itoa(p.Partition)
				ch <- prometheus.MustNewConstMetric(processed, prometheus.CounterValue, float64(p.Samples), part)
				if p.DataTime > 0 {
					ch <- prometheus.MustNewConstMetric(lag, prometheus.GaugeValue, p.Lag.Seconds(), part)
				}
				if st.Watermark > 0 {
					ch <- prometheus.MustNewConstMetric(watermark, prometheus.GaugeValue, float64(st.Watermark)/1000, part)
				}
			}
			for reason, n := range map[string]uint64{
				"implausible_time": st.ImplausibleSamples,
				"node_mismatch":    st.SpoofedNode,
				"decode":           st.DecodeErrors + st.Panics,
				"stale":            st.StaleSamples,
				"ports_per_node":   st.PortsPerNodeRefused,
			} {
				ch <- prometheus.MustNewConstMetric(refused, prometheus.CounterValue, float64(n), reason)
			}
			types := make([]string, 0, len(st.Incidents))
			for typ := range st.Incidents {
				types = append(types, typ)
			}
			sort.Strings(types)
			for _, typ := range types {
				for state, n := range st.Incidents[typ] {
					ch <- prometheus.MustNewConstMetric(decided, prometheus.CounterValue, float64(n), typ, state)
				}
			}
			for typ, n := range st.OpenIncidents {
				ch <- prometheus.MustNewConstMetric(open, prometheus.GaugeValue, float64(n), typ)
			}
			ch <- prometheus.MustNewConstMetric(owned, prometheus.GaugeValue, float64(st.PartitionsOwned))
			ch <- prometheus.MustNewConstMetric(trackedPts, prometheus.GaugeValue, float64(st.Ports))
			ch <- prometheus.MustNewConstMetric(telemetry.DeadLetters, prometheus.CounterValue, float64(st.DeadLetters), "processor", schemas.StreamCounters)
			ch <- prometheus.MustNewConstMetric(telemetry.DeadLetters, prometheus.CounterValue, float64(st.InventoryDeadLetters), "processor", schemas.StreamInventory)
		},
	))
}
