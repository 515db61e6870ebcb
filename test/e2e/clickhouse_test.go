package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

type portKey struct {
	node, device string
	port         int
}

// traceSamples counts the distinct samples of each port (a duplicated line
// is one sample) and remembers each port's first raw port_xmit_data.
func traceSamples(t *testing.T, path string) (map[portKey]int, map[portKey]uint64) {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	seen := map[string]bool{}
	counts := map[portKey]int{}
	first := map[portKey]uint64{}
	for {
		l, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind != trace.KindSample {
			continue
		}
		k := portKey{l.Node, l.Device, l.Port}
		id := fmt.Sprintf("%v@%d", k, l.Time().UnixMilli())
		if seen[id] {
			continue
		}
		seen[id] = true
		if counts[k] == 0 {
			first[k] = l.Counters["port_xmit_data"]
		}
		counts[k]++
	}
	return counts, first
}

// TestReplayIntoClickHouse: rows in ClickHouse match the samples, events
// match the events file, and replaying the same trace again (every batch
// and event redelivered) adds nothing.
func TestReplayIntoClickHouse(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	const scenario = "flap-and-saturation"
	evs, _ := replay(t, scenario, "--clickhouse", dsn)
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	counts, first := traceSamples(t, tracePath(scenario))
	total := 0
	for _, n := range counts {
		total += n
	}
	check := func(round string) {
		n, err := chtest.Count(ctx, conn, "port_samples", "")
		if err != nil {
			t.Fatal(err)
		}
		if int(n) != total {
			t.Errorf("%s: port_samples has %d rows, the trace %d distinct samples", round, n, total)
		}
		for k, want := range counts {
			got, err := chtest.Count(ctx, conn, "port_samples", fmt.Sprintf("node = '%s' AND device = '%s' AND port = %d", k.node, k.device, k.port))
			if err != nil {
				t.Fatal(err)
			}
			if int(got) != want {
				t.Errorf("%s: %v has %d rows, want %d", round, k, got, want)
			}
		}
		ne, err := chtest.Count(ctx, conn, "events", "")
		if err != nil {
			t.Fatal(err)
		}
		if int(ne) != len(evs) {
			t.Errorf("%s: events table has %d rows, the events file %d lines", round, ne, len(evs))
		}
	}
	check("first replay")

	// The baseline row keeps the raw reading; the flap shows as a delta.
	for k, raw := range first {
		var got uint64
		q := fmt.Sprintf("SELECT flagged_value[indexOf(flagged_name, 'port_xmit_data')] FROM port_samples FINAL WHERE node = '%s' AND device = '%s' AND port = %d AND first = 1 ORDER BY time_ms LIMIT 1", k.node, k.device, k.port)
		if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != raw {
			t.Errorf("%v: first port_xmit_data %d in ClickHouse, %d in the trace", k, got, raw)
		}
		break
	}
	var downs uint64
	if err := conn.QueryRow(ctx, "SELECT sum(link_downed) FROM port_samples FINAL WHERE node = 'gpu-002'").Scan(&downs); err != nil {
		t.Fatal(err)
	}
	if downs == 0 {
		t.Errorf("the link flap of gpu-002 left no link_downed delta in ClickHouse")
	}
	var flapRows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM events FINAL WHERE type = 'link_flap' AND subject_node = 'gpu-002'").Scan(&flapRows); err != nil {
		t.Fatal(err)
	}
	if flapRows == 0 {
		t.Errorf("the link_flap event is not in ClickHouse")
	}

	// Everything again: the same batches and events, as a redelivery would.
	replay(t, scenario, "--clickhouse", dsn)
	check("second replay")
}
