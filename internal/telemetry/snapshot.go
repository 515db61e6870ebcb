package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Snapshot is a collector that exports a role's Stats snapshot at scrape
// time: the role counts with atomics as it always did, and a scrape costs
// one snapshot, whatever the number of metrics. descs are every metric
// collect may send.
func Snapshot(descs []*prometheus.Desc, collect func(ch chan<- prometheus.Metric)) prometheus.Collector {
	return &snapshotCollector{descs: descs, collect: collect}
}

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

// Desc describes the metric rdmawatch_<name> with variable labels.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

// DeadLetters is the metric every role uses for what it dead-lettered, by
// role and by the stream the message came from.
var DeadLetters = Desc("dead_letters_total", "Messages this role copied to the dead-letter stream, by the stream they came from.", "role", "stream")
