package telemetry

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// snapshotCollector exports a role's Stats snapshot at scrape time: the
// role counts with atomics as it always did, and a scrape costs one
// snapshot, whatever the number of metrics.
type snapshotCollector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

// deadLetters is the metric every role uses for what it dead-lettered.
var deadLetters = desc("dead_letters_total", "Messages this role copied to the dead-letter stream, by the stream they came from.", "role", "stream")

// RegisterProcessor exports a processor's Stats and the partition count of
// the counters stream it read at start.
func (s *Server) RegisterProcessor(stats func() engine.Stats, streamPartitions int) {
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "processor_stream_partitions",
		Help: "Partitions of the counters stream; the processors' partitions_owned sum to it when every partition has an owner.",
	}, func() float64 { return float64(streamPartitions) }))
	var (
		processed  = desc("processor_samples_processed_total", "Port samples accepted from each owned partition.", "partition")
		refused    = desc("processor_samples_refused_total", "Samples or messages refused, by reason (implausible_time, node_mismatch, decode, stale, ports_per_node).", "reason")
		lag        = desc("processor_lag_seconds", "Wall clock minus the newest data time consumed, per partition.", "partition")
		watermark  = desc("processor_watermark_timestamp_seconds", "The processor's watermark (data time) as seen by each partition.", "partition")
		decided    = desc("processor_events_published_total", "Incident state changes decided, by type and state.", "type", "state")
		open       = desc("processor_incidents_open", "Incidents open now, by type.", "type")
		owned      = desc("processor_partitions_owned", "Partitions of the counters stream this instance consumes.")
		trackedPts = desc("processor_ports", "Ports whose windows this instance keeps.")
	)
	s.reg.MustRegister(&snapshotCollector{
		descs: []*prometheus.Desc{processed, refused, lag, watermark, decided, open, owned, trackedPts, deadLetters},
		collect: func(ch chan<- prometheus.Metric) {
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
			ch <- prometheus.MustNewConstMetric(deadLetters, prometheus.CounterValue, float64(st.DeadLetters), "processor", schemas.StreamCounters)
			ch <- prometheus.MustNewConstMetric(deadLetters, prometheus.CounterValue, float64(st.InventoryDeadLetters), "processor", schemas.StreamInventory)
		},
	})
}
