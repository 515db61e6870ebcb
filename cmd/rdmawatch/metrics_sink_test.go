package main

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/sink"
)

// TestSinkMetricsOneSeriesPerStream: inventory and port_config read the
// same stream; the stream-labelled series sum them, so the registry
// gathers without a duplicate (a duplicate made every /metrics scrape of
// the sink fail with 500).
func TestSinkMetricsOneSeriesPerStream(t *testing.T) {
	s := telemetry.New("sink", "test", nil)
	registerSinkMetrics(s.Registry(), func() sink.Stats {
		return sink.Stats{
			"port_samples": {Rows: 10},
			"inventory":    {Rows: 2, Pending: 1, DeadLettered: 1},
			"port_config":  {Rows: 3, Pending: 2, DeadLettered: 4},
		}
	})
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "rdmawatch_sink_pending_messages" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && l.GetValue() == "RDMAWATCH_INVENTORY" {
					found = true
					if v := m.GetGauge().GetValue(); v != 3 {
						t.Errorf("pending for the inventory stream %v, want 3 (both tables)", v)
					}
				}
			}
		}
	}
	if !found {
		t.Error("no rdmawatch_sink_pending_messages series for RDMAWATCH_INVENTORY")
	}
}
