package sink_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// startNATS runs an embedded JetStream with the rdmawatch streams in memory.
func startNATS(t *testing.T) jetstream.JetStream {
	t.Helper()
	return natstest.Start(t, &schemas.StreamOptions{Memory: true, Partitions: 2}).JS
}

// migrated returns a connection into a fresh, migrated database on dsn's server.
func migrated(t *testing.T, serverDSN string) (driver.Conn, string) {
	t.Helper()
	dsn := chtest.NewDatabase(t, serverDSN)
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return conn, dsn
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fastConfig flushes quickly and retries quickly, so tests wait little.
func fastConfig(dsn string) sink.Config {
	return sink.Config{
		DSN: dsn, BatchRows: 1000, FlushInterval: 50 * time.Millisecond,
		ConsumerPrefix: "test-sink", AckWait: 5 * time.Second, InsertTimeout: 10 * time.Second,
		RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		RollupEvery: 100 * time.Millisecond,
	}
}

// runSink starts Run; the returned stop cancels it and returns Run's error.
// The test's cleanup stops it too if the test did not.
func runSink(t *testing.T, js jetstream.JetStream, conn driver.Conn, cfg sink.Config) (s *sink.Sink, stop func() error) {
	t.Helper()
	s, err := sink.New(js, conn, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("sink Run did not return 30s after cancel")
			}
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("sink Run: %v", err)
		}
	})
	return s, stop
}

func publish(t *testing.T, js jetstream.JetStream, subject string, data []byte, opts ...jetstream.PublishOpt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, data, opts...); err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
}

func publishBatch(t *testing.T, js jetstream.JetStream, b *schemas.CounterBatch, opts ...jetstream.PublishOpt) {
	t.Helper()
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, schemas.CountersSubject(b.Node), data, opts...)
}

func publishEvent(t *testing.T, js jetstream.JetStream, e *schemas.Event) {
	t.Helper()
	data, err := schemas.EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, schemas.EventSubject(e), data)
}

func publishInventory(t *testing.T, js jetstream.JetStream, inv *schemas.Inventory) {
	t.Helper()
	data, err := schemas.EncodeInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, schemas.InventorySubject(inv.Node), data)
}

// waitCount polls until table holds want rows (FINAL) matching where.
func waitCount(t *testing.T, conn driver.Conn, table, where string, want uint64) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d rows in %s where %q", want, table, where), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := chtest.Count(ctx, conn, table, where)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%s has %d rows (where %q), want %d", table, n, where, want)
		}
		return nil
	})
}

// consumerInfo reads a consumer's state from the server.
func consumerInfo(js jetstream.JetStream, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// waitDrained polls until the sink's consumer has acked everything.
func waitDrained(t *testing.T, js jetstream.JetStream, stream, consumer string) {
	t.Helper()
	testwait.For(t, 30*time.Second, "consumer "+consumer+" drained", func() error {
		info, err := consumerInfo(js, stream, consumer)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("consumer %s: %d pending, %d unacked", consumer, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

func TestSinkWritesRows(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	s, _ := runSink(t, js, conn, fastConfig(dsn))

	b := testBatch()
	publishBatch(t, js, b, jetstream.WithMsgID(b.MsgID()))
	publishEvent(t, js, testEvent())
	resolved := testEvent()
	resolved.State, resolved.End, resolved.Revision = schemas.StateResolved, ms(1767225700000), 4
	publishEvent(t, js, resolved)
	publishInventory(t, js, testInventory())

	drainCtx, drainCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer drainCancel()
	if err := s.WaitDrained(drainCtx); err != nil {
		t.Fatal(err)
	}
	// Drained means written: no polling of ClickHouse needed.
	for table, want := range map[string]uint64{"port_samples": 2, "events": 2, "inventory": 2} {
		if n, err := chtest.Count(drainCtx, conn, table, ""); err != nil || n != want {
			t.Fatalf("after WaitDrained %s has %d rows (%v), want %d", table, n, err, want)
		}
	}
	waitCount(t, conn, "port_samples", "", 2)
	waitCount(t, conn, "events", "", 2)
	waitCount(t, conn, "inventory", "", 2)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The columns of every table are exactly what the sink writes: a
	// migration and the row code cannot drift apart unnoticed. (Compared as
	// sets: the INSERTs name their columns, and 18.16's system.columns has
	// no position to order by.)
	for table, cols := range map[string][]string{"port_samples": sink.SampleColumns, "events": sink.EventColumns, "inventory": sink.InventoryColumns} {
		// ALIAS columns are computed when read; the arrays of the layout
		// before 0011 stay for the rows written then, empty on new ones.
		got := chtest.Strings(t, conn, `SELECT name FROM system.columns WHERE database = currentDatabase() AND table = ?
			AND default_kind != 'ALIAS' AND name NOT IN ('counter_source', 'counter_name', 'counter_delta', 'counter_value',
			'counter_flags', 'rx_prio_pause', 'tx_prio_pause', 'rx_prio_pause_duration_us', 'tx_prio_pause_duration_us') ORDER BY name`, table)
		cols = slices.Sorted(slices.Values(cols))
		if !reflect.DeepEqual(got, cols) {
			t.Errorf("%s columns\n%v\nsink writes\n%v", table, got, cols)
		}
	}

	var (
		ts                            time.Time
		timeMs                        int64
		port                          uint16
		first, reset                  uint8
		xmitBytes, rcvBytes, cnp, rxP uint64
		extra                         []string
		extraDelta                    []uint64
		saturated, flagged            []string
		flags                         []uint8
		values                        []uint64
	)
	err := conn.QueryRow(ctx, `SELECT ts, time_ms, port, first, reset, xmit_bytes, rcv_bytes, np_cnp_sent, rx_pause,
		extra_name, extra_delta, saturated, flagged_name, flagged_flags, flagged_value
		FROM port_samples FINAL WHERE node = 'gpu-017' AND device = 'mlx5_0'`).Scan(
		&ts, &timeMs, &port, &first, &reset, &xmitBytes, &rcvBytes, &cnp, &rxP, &extra, &extraDelta, &saturated, &flagged, &flags, &values)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"ts", ts.UTC(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"time_ms", timeMs, int64(1767225600123)},
		{"port", port, uint16(1)},
		{"first", first, uint8(0)},
		{"reset", reset, uint8(1)},
		{"xmit_bytes", xmitBytes, uint64(8000)},
		{"rcv_bytes", rcvBytes, uint64(4000)},
		{"np_cnp_sent", cnp, uint64(11)},
		{"rx_pause", rxP, uint64(105)},
		{"extra_name (ALIAS)", extra, []string{"rx_prio3_pause", "rx_prio5_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio7_pause_duration"}},
		{"extra_delta", extraDelta, []uint64{100, 5, 2, 900, 30}},
		{"saturated", saturated, []string{"symbol_error"}},
		{"flagged_name (ALIAS)", flagged, []string{"symbol_error", "port_rcv_errors", "np_cnp_sent", "out_of_sequence"}},
		{"flagged_flags", flags[2], uint8(schemas.FlagWrapped)},
		{"flagged_value", values[2], uint64(4294967290)},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("port_samples %s = %v, want %v", c.name, c.got, c.want)
		}
	}

	// delta_name/delta_value (ALIAS) list every counter's delta, the named
	// columns under their counters' names.
	var deltaNames []string
	var deltaValues []uint64
	if err := conn.QueryRow(ctx, `SELECT delta_name, delta_value FROM port_samples FINAL WHERE node = 'gpu-017' AND device = 'mlx5_0'`).
		Scan(&deltaNames, &deltaValues); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for i, n := range deltaNames {
		got[n] += deltaValues[i]
	}
	for name, want := range map[string]uint64{"port_xmit_data": 8000, "port_rcv_data": 4000, "np_cnp_sent": 11, "rx_prio3_pause": 100,
		"tx_prio7_pause_duration": 30, "port_rcv_errors": 3, "rx_vport_unicast_packets": 9, "tx_pause_storm_warning_events": 1} {
		if got[name] != want {
			t.Errorf("delta_value of %s = %d, want %d (all: %v)", name, got[name], want, got)
		}
	}

	// The InfiniBand port's arrays are empty but for its one flagged
	// counter: the block hands the driver nil slices for empty arrays
	// (block.go), which must land as empty arrays, row by row.
	var lengths []uint64
	if err := conn.QueryRow(ctx, `SELECT [length(saturated), length(extra_id), length(extra_delta), length(flagged_id), length(flagged_value),
		length(unknown_name), length(unknown_delta), length(gauge_name), length(gauge_value)]
		FROM port_samples FINAL WHERE node = 'gpu-017' AND device = 'mlx5_1'`).Scan(&lengths); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{0, 0, 0, 1, 1, 0, 0, 0, 0}; !reflect.DeepEqual(lengths, want) {
		t.Errorf("mlx5_1's array lengths (saturated, extra, flagged, unknown, gauges) %v, want %v", lengths, want)
	}

	var (
		state, evidence string
		endMs           *int64
		endTs           *time.Time
		affected        []string
		hops            []uint8
		next            []string
	)
	err = conn.QueryRow(ctx, `SELECT state, end_ms, end_ts, evidence, affected_node, affected_hops, next_checks
		FROM events FINAL WHERE revision = 3`).Scan(&state, &endMs, &endTs, &evidence, &affected, &hops, &next)
	if err != nil {
		t.Fatal(err)
	}
	if state != "update" || endMs != nil || endTs != nil || !reflect.DeepEqual(affected, []string{"gpu-018", "gpu-019"}) ||
		!reflect.DeepEqual(hops, []uint8{2, 4}) || len(next) != 2 || evidence == "" {
		t.Errorf("open event row: state %s end %v/%v affected %v hops %v next %v evidence %s", state, endMs, endTs, affected, hops, next, evidence)
	}
	err = conn.QueryRow(ctx, `SELECT end_ms, end_ts FROM events FINAL WHERE revision = 4`).Scan(&endMs, &endTs)
	if err != nil {
		t.Fatal(err)
	}
	if endMs == nil || *endMs != 1767225700000 || endTs == nil || endTs.Unix() != 1767225700 {
		t.Errorf("resolved event end %v / %v", endMs, endTs)
	}

	// events_latest carries the cause of the incident's latest state.
	var causeID, causeType, causeNode string
	var causePort uint16
	err = conn.QueryRow(ctx, `SELECT cause_id, cause_type, cause_node, cause_port FROM events_latest`).Scan(&causeID, &causeType, &causeNode, &causePort)
	if err != nil {
		t.Fatal(err)
	}
	if causeID != "receive_starvation/gpu-017/mlx5_0/1/1767225500" || causeType != schemas.TypeReceiveStarvation || causeNode != "gpu-017" || causePort != 1 {
		t.Errorf("events_latest cause %q %q %q %d", causeID, causeType, causeNode, causePort)
	}

	var fw string
	var lastSeen time.Time
	if err := conn.QueryRow(ctx, "SELECT fw_ver, last_seen FROM inventory FINAL WHERE device = 'mlx5_0'").Scan(&fw, &lastSeen); err != nil {
		t.Fatal(err)
	}
	if fw != "28.39.1002" || lastSeen.Unix() != 1767225600 {
		t.Errorf("inventory fw %q last_seen %v", fw, lastSeen)
	}

	for _, c := range []struct{ stream, consumer string }{
		{schemas.StreamCounters, "test-sink-counters"}, {schemas.StreamEvents, "test-sink-events"}, {schemas.StreamInventory, "test-sink-inventory"},
	} {
		waitDrained(t, js, c.stream, c.consumer)
	}
}

// A batch written twice (a collector retry past the dedup window, a
// redelivery after a lost ack) leaves one row per port.
func TestSinkRedeliveredBatchCollapses(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	_, _ = runSink(t, js, conn, fastConfig(dsn))

	b := testBatch()
	publishBatch(t, js, b) // no msg id: JetStream keeps both copies
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	publishBatch(t, js, b)
	publishEvent(t, js, testEvent())
	publishEvent(t, js, testEvent())
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	waitDrained(t, js, schemas.StreamEvents, "test-sink-events")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var raw uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM port_samples").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	t.Logf("port_samples holds %d rows before merging, 2 after", raw)
	waitCount(t, conn, "port_samples", "", 2)
	waitCount(t, conn, "events", "", 1)
}

// A message that cannot be decoded is terminated and does not hold up the
// messages behind it.
func TestSinkPoisonMessage(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	_, _ = runSink(t, js, conn, fastConfig(dsn))

	publish(t, js, schemas.CountersSubject("gpu-017"), []byte("not msgpack"))
	publish(t, js, schemas.EventSubject(&schemas.Event{Type: "pfc_storm", Scope: "port"}), []byte{0x80}) // an empty map: no version
	publishBatch(t, js, testBatch())
	publishEvent(t, js, testEvent())

	waitCount(t, conn, "port_samples", "", 2)
	waitCount(t, conn, "events", "", 1)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	waitDrained(t, js, schemas.StreamEvents, "test-sink-events")
}

// Cancelling Run writes what the sink still buffers before it returns.
func TestSinkFlushesOnShutdown(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.FlushInterval = time.Hour // only shutdown can flush
	cfg.AckWait = 2 * time.Hour
	_, stop := runSink(t, js, conn, cfg)

	publishBatch(t, js, testBatch())
	// Wait until the sink holds the message unacked.
	testwait.For(t, 10*time.Second, "the sink to hold the message unacked", func() error {
		info, err := consumerInfo(js, schemas.StreamCounters, "test-sink-counters")
		if err != nil {
			return err
		}
		if info.NumAckPending != 1 {
			return fmt.Errorf("%d unacked, want 1", info.NumAckPending)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	waitCount(t, conn, "port_samples", "", 2)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
}

// The last rows of a backlog do not wait out the flush interval: after
// flushes that went by size, a pull that comes back short flushes the
// rest. A lone message at a steady low rate still waits for the interval
// (INSERTs no smaller and no more frequent than before).
func TestSinkBacklogEndsWithoutWaiting(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	const t0 = int64(1767225600000)
	for m := range 25 { // 2 500 rows: two full flushes of 1 000 and a rest of 500
		publishBatch(t, js, batchAt(fmt.Sprintf("gpu-%02d", m), 1, 100, t0))
	}
	cfg := fastConfig(dsn)
	cfg.FlushInterval = 2 * time.Minute // longer than waitCount waits
	var inserts []int
	var mu sync.Mutex
	cfg.ObserveInsert = func(table string, rows int, took time.Duration, err error) {
		if table == "port_samples" && err == nil {
			mu.Lock()
			inserts = append(inserts, rows)
			mu.Unlock()
		}
	}
	_, stop := runSink(t, js, conn, cfg)
	waitCount(t, conn, "port_samples", "", 2500)
	mu.Lock()
	if got := fmt.Sprint(inserts); got != "[1000 1000 500]" {
		t.Errorf("inserts of %s rows, want [1000 1000 500]", got)
	}
	mu.Unlock()

	// Now the sink is idle and its last flush was not full: one more
	// message waits for the interval.
	publishBatch(t, js, batchAt("gpu-late", 1, 2, t0))
	// From when the sink holds the message, four pulls' worth of waiting
	// (maxFetchWait, 500 ms) come back short without flushing it. The
	// sleep must stay a sleep: it proves that no flush comes in that time.
	testwait.For(t, 10*time.Second, "the sink to hold the lone message", func() error {
		info, err := consumerInfo(js, schemas.StreamCounters, "test-sink-counters")
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 1 {
			return fmt.Errorf("%d undelivered, %d unacked; want 0 and 1", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := chtest.Count(ctx, conn, "port_samples", "node = 'gpu-late'"); err != nil || n != 0 {
		t.Errorf("a lone message's rows went before the flush interval: %d rows, err %v", n, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, conn, "port_samples", "node = 'gpu-late'", 2) // flushed on shutdown
}

// The sink's consumers read their streams whole, with no filter subject,
// and a consumer an older release created with one (every stream's
// all-subjects filter) is updated in place: its progress kept, nothing read
// twice.
func TestSinkConsumersHaveNoFilter(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	consumers := []struct{ name, stream, oldFilter string }{
		{cfg.ConsumerPrefix + "-counters", schemas.StreamCounters, schemas.CountersAllFilter},
		{cfg.ConsumerPrefix + "-events", schemas.StreamEvents, schemas.EventsAllFilter},
		{cfg.ConsumerPrefix + "-inventory", schemas.StreamInventory, schemas.InventoryAllFilter},
		{cfg.ConsumerPrefix + "-config", schemas.StreamInventory, schemas.InventoryAllFilter},
	}
	for _, c := range consumers {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.stream, jetstream.ConsumerConfig{
			Durable: c.name, FilterSubject: c.oldFilter,
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		}); err != nil {
			t.Fatalf("consumer %s as an older release made it: %v", c.name, err)
		}
	}
	const t0 = int64(1767225600000)
	publishBatch(t, js, batchAt("gpu-a", 1, 3, t0))
	// The old counters consumer already took and acked one message.
	oldCons, err := js.Consumer(ctx, schemas.StreamCounters, cfg.ConsumerPrefix+"-counters")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := oldCons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publishBatch(t, js, batchAt("gpu-b", 1, 2, t0))

	_, stop := runSink(t, js, conn, cfg)
	waitCount(t, conn, "port_samples", "", 2)
	for _, c := range consumers {
		cons, err := js.Consumer(ctx, c.stream, c.name)
		if err != nil {
			t.Fatal(err)
		}
		info := cons.CachedInfo()
		if info.Config.FilterSubject != "" || len(info.Config.FilterSubjects) != 0 {
			t.Errorf("consumer %s filters on %q %q, want no filter", c.name, info.Config.FilterSubject, info.Config.FilterSubjects)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n, err := chtest.Count(ctx, conn, "port_samples", "node = 'gpu-a'"); err != nil || n != 0 {
		t.Errorf("the message the old consumer acked was read again: %d rows of gpu-a, err %v", n, err)
	}
	if n, err := chtest.Count(ctx, conn, "port_samples", ""); err != nil || n != 2 {
		t.Errorf("port_samples holds %d rows, want gpu-b's 2 (err %v)", n, err)
	}
}

// ClickHouse going away loses nothing: the sink retries and keeps its
// messages in progress until the server is back.
func TestSinkSurvivesClickHouseRestart(t *testing.T) {
	t.Parallel()
	srv := chtest.StartPrivate(t)
	conn, dsn := migrated(t, srv.DSN)
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.AckWait = 3 * time.Second // shorter than the outage: only InProgress prevents redelivery
	cfg.InsertTimeout = time.Second
	cfg.RetryMax = 300 * time.Millisecond
	s, _ := runSink(t, js, conn, cfg)

	b := testBatch()
	publishBatch(t, js, b)
	waitCount(t, conn, "port_samples", "", 2)
	// Acked too: on a loaded machine the INSERT can time out on the client
	// and land, and the sink acks after it checked.
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")

	stopStart := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("clickhouse stopped in %v", time.Since(stopStart))
	const batches = 20
	for i := 1; i <= batches; i++ {
		nb := testBatch()
		nb.Seq = uint64(100 + i)
		for p := range nb.Ports {
			nb.Ports[p].TimeMs += int64(i) * 1000
		}
		publishBatch(t, js, nb, jetstream.WithMsgID(nb.MsgID()))
	}
	// Keep the server down past the ack wait while the sink retries: a
	// redelivery would show in the consumer's counts if the sink did not
	// keep its messages in progress.
	stoppedAt := time.Now()
	testwait.For(t, 20*time.Second, "an outage past the ack wait, every message held", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, schemas.StreamCounters, "test-sink-counters")
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumRedelivered != 0 {
			t.Fatalf("%d messages redelivered while clickhouse was down: InProgress did not hold them", info.NumRedelivered)
		}
		if info.NumAckPending != batches {
			return fmt.Errorf("%d unacked, want %d", info.NumAckPending, batches)
		}
		if since := time.Since(stoppedAt); since < cfg.AckWait+time.Second {
			return fmt.Errorf("outage %v, want past the ack wait %v", since, cfg.AckWait)
		}
		return nil
	})

	upStart := time.Now()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("clickhouse up again in %v", time.Since(upStart))
	waitCount(t, conn, "port_samples", "", 2+2*batches)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, schemas.StreamCounters, "test-sink-counters")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 {
		t.Errorf("%d messages were redelivered during the outage: InProgress did not hold them", info.NumRedelivered)
	}
	// An outage is not the data's fault: nothing was dead-lettered. The
	// failing step may be the check of what is stored already, which the
	// sink runs first in the window after its start: it counts as an
	// error of the write path too.
	st := s.Stats()["port_samples"]
	if st.DeadLettered != 0 || st.Refused != 0 || st.Retries == 0 || st.InsertErrors == 0 {
		t.Errorf("after the outage: stats %+v, want retries, errors counted and no dead letters", st)
	}
	dlq, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if dinfo, err := dlq.Info(ctx); err != nil || dinfo.State.Msgs != 0 {
		t.Errorf("dead-letter stream after the outage: %+v, %v", dinfo, err)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := sink.New(nil, nil, sink.Config{}, nil); !errors.Is(err, sink.ErrInvalidConfig) {
		t.Fatalf("New without js and conn: %v", err)
	}
}

// TestCounterDictionaryMatchesSchemas: the names migration 0011 gives the
// ids (counter_dictionary, extra_name, flagged_name) are the wire's
// dictionary. When schemas' dictionary grows, this fails until a migration
// names the new ids too.
func TestCounterDictionaryMatchesSchemas(t *testing.T) {
	t.Parallel()
	conn, _ := migrated(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT id, source, name FROM counter_dictionary ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var id uint16
		var src uint8
		var name string
		if err := rows.Scan(&id, &src, &name); err != nil {
			t.Fatal(err)
		}
		cid := schemas.CounterID(n)
		if int(id) != n || n >= schemas.CounterIDs || schemas.Source(src) != cid.Source() || name != cid.Name() {
			t.Fatalf("counter_dictionary row %d: id %d source %d name %q; schemas has %d entries", n, id, src, name, schemas.CounterIDs)
		}
	}
	if n != schemas.CounterIDs {
		t.Errorf("counter_dictionary names %d ids, schemas' dictionary has %d: add a migration that names the new ones (view and ALIAS columns)", n, schemas.CounterIDs)
	}
}

// TestSampleOrderIsTheTableKey: the order the sink sorts an INSERT's rows
// in is port_samples' sorting key as the server reports it, so a key
// changed by a migration cannot leave the sink sorting by the old one (and
// ClickHouse permuting every block again).
func TestSampleOrderIsTheTableKey(t *testing.T) {
	t.Parallel()
	conn, _ := migrated(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var key string
	if err := conn.QueryRow(ctx, "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = 'port_samples'").Scan(&key); err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, name := range strings.Split(key, ",") {
		i := slices.Index(sink.SampleColumns, strings.TrimSpace(name))
		if i < 0 {
			t.Fatalf("sorting key %q: column %q is not one the sink writes", key, name)
		}
		idx = append(idx, i)
	}
	byKey := func(a, b *sink.SampleRow) int {
		va, vb := a.Values(), b.Values()
		for _, i := range idx {
			if c := compareValues(va[i], vb[i]); c != 0 {
				return c
			}
		}
		return 0
	}
	var rows []*sink.SampleRow
	for _, node := range []string{"b", "a", "a-1", "B"} {
		for _, dev := range []string{"mlx5_10", "mlx5_2", "mlx5_1"} {
			for port := 3; port >= 1; port-- {
				for _, ms := range []int64{1767225600900, 1767225600100} {
					rows = append(rows, &sink.SampleRow{Node: node, Device: dev, Port: uint16(port), TimeMs: ms})
				}
			}
		}
	}
	want := slices.Clone(rows)
	slices.SortStableFunc(want, byKey)
	sink.SortSampleRows(rows)
	if !slices.Equal(rows, want) {
		t.Fatalf("the sink's row order differs from the sorting key %q", key)
	}
}

// compareValues compares two values of one port_samples column the way
// ClickHouse orders them (strings bytewise, numbers by value).
func compareValues(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case uint16:
		return cmp.Compare(a, b.(uint16))
	case int64:
		return cmp.Compare(a, b.(int64))
	case time.Time:
		return a.Compare(b.(time.Time))
	}
	panic(fmt.Sprintf("compareValues: %T", a))
}
