package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// deadLetter is one message of the dead-letter stream.
type deadLetter struct {
	subject, reason, from string
	data                  []byte
}

// deadLetters waits until the dead-letter stream holds want messages and
// returns them, keyed by the subject they came on.
func deadLetters(t *testing.T, js jetstream.JetStream, want int) map[string]deadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d dead letters", want), func() error {
		st, err := js.Stream(ctx, schemas.StreamDeadLetter)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if int(info.State.Msgs) != want {
			return fmt.Errorf("%d dead letters, want %d", info.State.Msgs, want)
		}
		return nil
	})
	cons, err := js.OrderedConsumer(ctx, schemas.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]deadLetter{}
	for range want {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Headers()
		dl := deadLetter{subject: m.Subject(), reason: h.Get(schemas.HeaderDeadReason), from: h.Get(schemas.HeaderDeadSubject), data: m.Data()}
		out[dl.from] = dl
	}
	return out
}

// batchAt is a counter batch of node with ports ports, all with deltas (no
// baseline), at data time tMs.
func batchAt(node string, seq uint64, ports int, tMs int64) *schemas.CounterBatch {
	b := &schemas.CounterBatch{Version: schemas.Version, Node: node, BootID: "boot-1", Seq: seq, TimeMs: tMs}
	for p := range ports {
		b.Ports = append(b.Ports, schemas.PortSample{
			Device: fmt.Sprintf("mlx5_%d", p), Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
			TimeMs: tMs + int64(p), IntervalMs: 10_000,
			Counters: []schemas.CounterDelta{
				cd(schemas.SourceCounters, "port_rcv_data", 1000*seq+uint64(p), 1e9, 0),
				cd(schemas.SourceCounters, "port_xmit_data", 2000*seq+uint64(p), 2e9, 0),
				cd(schemas.SourceCounters, "symbol_error", seq%3, 10, 0),
				cd(schemas.SourceEthtool, "tx_prio3_pause_duration", 100*seq, 1e6, 0),
			},
		})
	}
	return b
}

// Every kind of poison lands in the dead-letter stream with its reason; the
// good messages around them land in ClickHouse and nothing stays pending.
func TestSinkDeadLettersPoison(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	s, _ := runSink(t, js, conn, fastConfig(dsn))

	const t0 = int64(1767225600000)
	publishBatch(t, js, batchAt("gpu-001", 1, 2, t0))
	// Random bytes, and an empty map (no version), on counters and events.
	publish(t, js, schemas.CountersSubject("gpu-002"), []byte("\xde\xad\xbe\xefnot msgpack"))
	publish(t, js, schemas.EventSubject(&schemas.Event{Type: "pfc_storm", Scope: "port", Layer: "link_network", Severity: "critical", State: "open"}), []byte{0x80})
	// A collector allowed only gpu-a's subject writing gpu-victim's rows.
	spoofed, err := schemas.EncodeBatch(batchAt("gpu-victim", 1, 2, t0))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, schemas.CountersSubject("gpu-a"), spoofed)
	inv := testInventory()
	inv.Node = "gpu-victim"
	invData, err := schemas.EncodeInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, schemas.InventorySubject("gpu-a"), invData)
	publishBatch(t, js, batchAt("gpu-003", 1, 2, t0))
	publishEvent(t, js, testEvent())
	publishInventory(t, js, testInventory())

	dl := deadLetters(t, js, 4)
	for _, c := range []struct{ from, reason string }{
		{"rdmawatch.counters.", "undecodable"}, // the partition is the stream's choice
		{schemas.EventSubject(&schemas.Event{Type: "pfc_storm", Scope: "port", Layer: "link_network", Severity: "critical", State: "open"}), "undecodable"},
		{"", "spoofed node"},
		{schemas.InventorySubject("gpu-a"), "spoofed node"},
	} {
		found := false
		for from, d := range dl {
			if strings.HasPrefix(from, c.from) && strings.Contains(d.reason, c.reason) && strings.HasPrefix(d.subject, "rdmawatch.deadletter.sink.") {
				found = true
			}
		}
		if !found {
			t.Errorf("no dead letter from %q with reason %q in %v", c.from, c.reason, dl)
		}
	}
	waitCount(t, conn, "port_samples", "node IN ('gpu-001', 'gpu-003')", 4)
	waitCount(t, conn, "port_samples", "node = 'gpu-victim'", 0)
	waitCount(t, conn, "inventory", "node = 'gpu-victim'", 0)
	waitCount(t, conn, "events", "", 1)
	waitCount(t, conn, "inventory", "", 2)
	for _, c := range []struct{ stream, consumer string }{
		{schemas.StreamCounters, "test-sink-counters"}, {schemas.StreamEvents, "test-sink-events"}, {schemas.StreamInventory, "test-sink-inventory"},
	} {
		waitDrained(t, js, c.stream, c.consumer)
	}
	st := s.Stats()
	if c, i, e := st["port_samples"], st["inventory"], st["events"]; c.Poison != 1 || c.Spoofed != 1 || i.Spoofed != 1 || e.Poison != 1 ||
		c.DeadLettered+i.DeadLettered+e.DeadLettered != 4 || c.Rows != 4 {
		t.Errorf("stats %+v", st)
	}
}

// Rows ClickHouse refuses as data (here an expression on the values that
// throws, as a constraint would) are isolated: the batch is bisected, the
// good messages of the same batch land, and the refused one is dead-lettered
// after RefuseAttempts.
func TestSinkRefusedRowsDeadLettered(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Evaluated for every inserted block before anything is written.
	if err := conn.Exec(ctx, "ALTER TABLE port_samples ADD COLUMN refuse_guard UInt8 MATERIALIZED throwIf(node = 'gpu-refused')"); err != nil {
		t.Fatal(err)
	}
	js := startNATS(t)
	// Publish first, so one flush holds the good and the bad together.
	const t0 = int64(1767225600000)
	const good = 9
	for i := range good {
		publishBatch(t, js, batchAt(fmt.Sprintf("gpu-%03d", i), 1, 2, t0))
		if i == 4 {
			publishBatch(t, js, batchAt("gpu-refused", 1, 2, t0))
		}
	}
	cfg := fastConfig(dsn)
	cfg.RefuseAttempts = 2
	s, _ := runSink(t, js, conn, cfg)

	dl := deadLetters(t, js, 1)
	for from, d := range dl {
		if !strings.HasSuffix(from, ".gpu-refused") || !strings.Contains(d.reason, "clickhouse refused") || !strings.Contains(d.reason, "throwIf") {
			t.Errorf("dead letter from %s: reason %q", from, d.reason)
		}
		b, err := schemas.DecodeBatch(d.data)
		if err != nil || b.Node != "gpu-refused" {
			t.Errorf("dead letter does not carry the message: %v %v", b, err)
		}
	}
	waitCount(t, conn, "port_samples", "", 2*good)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	st := s.Stats()["port_samples"]
	if st.Refused != 1 || st.RefusedRows != 2 || st.DeadLettered != 1 || st.Rows+st.DuplicateRows < 2*good || st.InsertErrors < 2 {
		t.Errorf("stats %+v", st)
	}
}

// A ClickHouse that is away dead-letters nothing, however long: the sink
// retries (connection refused is not a refusal of the data).
func TestRefusedClassification(t *testing.T) {
	t.Parallel()
	conn, _ := migrated(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		query   string
		refused bool
	}{
		{"SELECT throwIf(1)", true},
		{"SELECT toUInt8('x')", true},
		{"SELECT * FROM no_such_table", false},
		{"SELECT sleep(2) SETTINGS max_execution_time = 1", false},
		{"SELEKT 1", false},
	} {
		err := conn.Exec(ctx, c.query)
		if err == nil {
			t.Fatalf("%s: no error", c.query)
		}
		if got := sink.Refused(err); got != c.refused {
			t.Errorf("%s: Refused(%v) = %v, want %v", c.query, err, got, c.refused)
		}
	}
	if sink.Refused(context.DeadlineExceeded) || sink.Refused(fmt.Errorf("dial tcp 127.0.0.1:1: connect: connection refused")) {
		t.Error("a timeout or a refused connection counts as refused data")
	}
}
