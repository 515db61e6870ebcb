package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSecurityCollectorFlood: one collector credential (col-gpu-001, as the
// shipped NATS users give it) floods the bus the way a compromised or broken
// node would: 150 batches of 1024 new ports each, then batches of 1024
// ports on 1024 distinct days in the past and in the future. The fleet must
// be unharmed: the processor tracks at most its bound of ports for that
// node, the sink stores none of the far-off samples (no partition per day),
// both dead-letter what they refused and count it, both stay ready, and a
// link flap on another node is still found and stored.
func TestSecurityCollectorFlood(t *testing.T) {
	const natsPort = 14594
	ns := securedNATS(t, natsPort)
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx := ctxT(t, 5*time.Minute)

	admin := []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-admin", natsAdminPW), "RDMAWATCH_CLICKHOUSE=" + dsn}
	mustRun(t, admin, "streams", "apply")
	mustRun(t, admin, "migrate")

	procPort, sinkPort := freePort(t), freePort(t)
	processor := startRole(t, "processor", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-processor", natsProcessorPW)},
		"processor", "--listen", fmt.Sprintf("127.0.0.1:%d", procPort))
	sink := startRole(t, "sink", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-sink", natsSinkPW), "RDMAWATCH_CLICKHOUSE=" + dsn},
		"sink", "--listen", fmt.Sprintf("127.0.0.1:%d", sinkPort))
	// The healthy fleet: two simulated nodes in data time from now, a flap
	// on gpu-002 two minutes in.
	collector := startRole(t, "collector", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-sim", natsCollectorPW)},
		"collector", "--source", "sim", "--sim-nodes", "2", "--sim-interval", "10s", "--speed", "30",
		"--inject", "link_flap@+2m:gpu-002/mlx5_0/1")
	metrics := func(port int) string {
		_, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		return body
	}
	testwait.Until(t, 90*time.Second, "the sink stores the fleet's samples", func() bool {
		v, _ := metricValue(metrics(sinkPort), "rdmawatch_sink_rows_inserted_total")
		return v > 0
	})

	// The attacker: gpu-001's own credentials, its own subject.
	nc, err := nats.Connect(ns.URL, nats.UserInfo("col-gpu-001", natsCollectorPW),
		nats.CustomInboxPrefix(natsutil.InboxPrefix(natsutil.RoleCollector, "gpu-001")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	batch := func(seq uint64, ports int, at func(i int) time.Time) []byte {
		b := &schemas.CounterBatch{Node: "gpu-001", BootID: "flood", Seq: seq, TimeMs: now.UnixMilli()}
		for i := range ports {
			tm := at(i).UnixMilli()
			b.Ports = append(b.Ports, schemas.PortSample{
				Device: fmt.Sprintf("flood_%d", seq), Port: i%65535 + 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "100 Gb/sec (4X EDR)",
				TimeMs: tm, IntervalMs: 10_000,
				Counters: []schemas.CounterDelta{{Name: "port_rcv_data", Source: schemas.SourceCounters, Delta: 4096}},
			})
		}
		data, err := schemas.EncodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	publish := func(data []byte, id string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := js.Publish(c, schemas.CountersSubject("gpu-001"), data, jetstream.WithMsgID(id)); err != nil {
			t.Fatalf("publish as col-gpu-001: %v", err)
		}
	}
	// New ports, at the data time of the fleet.
	for i := range 150 {
		publish(batch(uint64(i+1), 1024, func(int) time.Time { return now }), fmt.Sprintf("flood-ports-%d", i))
	}
	// Far-off days, behind and ahead.
	for i, sign := range []int{-1, 1, -1} {
		seq := uint64(1000 + i)
		publish(batch(seq, 1024, func(d int) time.Time { return now.AddDate(0, 0, sign*(d+30)) }), fmt.Sprintf("flood-days-%d", i))
	}

	// The processor: bounded, refusals counted.
	testwait.Until(t, 2*time.Minute, "the processor refuses the flood's ports", func() bool {
		v, _ := metricValue(metrics(procPort), `rdmawatch_processor_samples_refused_total{reason="ports_per_node"}`)
		return v > 0
	})
	if v, ok := metricValue(metrics(procPort), "rdmawatch_processor_ports"); !ok || v > 1000 {
		t.Errorf("the processor tracks %v ports after 153 600 flooded (bound: 256 per node without an inventory)", v)
	}
	// The sink: the far-off samples dead-lettered, no partition per day.
	testwait.Until(t, 2*time.Minute, "the sink dead-letters the far-off days", func() bool {
		v, _ := metricValue(metrics(sinkPort), `rdmawatch_dead_letters_total{role="sink",stream="RDMAWATCH_COUNTERS"}`)
		return v >= 3
	})
	conn := chtest.Open(t, dsn)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	var parts uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = @db AND table = 'port_samples' AND active",
		ch.Named("db", db)).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	var days uint64
	if err := conn.QueryRow(ctx, "SELECT uniqExact(toDate(ts)) FROM port_samples").Scan(&days); err != nil {
		t.Fatal(err)
	}
	if days > 2 {
		t.Errorf("port_samples holds %d distinct days: the far-off samples were stored", days)
	}
	// The fleet goes on: the flap on gpu-002 is found and stored, and both
	// roles stay ready.
	if err := testwait.Poll(3*time.Minute, "a link_flap of gpu-002 stored", func() error {
		n, err := chtest.Count(ctx, conn, "events", "type = 'link_flap' AND subject_node = 'gpu-002'")
		if err != nil || n == 0 {
			return fmt.Errorf("%d events, %v", n, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\nprocessor:\n%s", err, processor.out.String())
	}
	for name, port := range map[string]int{"processor": procPort, "sink": sinkPort} {
		if code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); code != 200 {
			t.Errorf("%s /readyz %d after the flood: %s", name, code, body)
		}
	}
	t.Logf("after the flood: %d active parts of port_samples", parts)
	for _, r := range []*role{collector, processor, sink} {
		r.stop()
		if strings.Contains(r.out.String(), "panic:") {
			t.Errorf("%s panicked:\n%s", r.name, r.out.String())
		}
	}
}
