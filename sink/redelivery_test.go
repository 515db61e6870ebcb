package sink_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// insertRows writes rows into port_samples the way the sink does.
func insertRows(t *testing.T, conn driver.Conn, rows []sink.SampleRow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO port_samples ("+strings.Join(sink.SampleColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := b.Append(rows[i].Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// rollupBuckets reads per port per bucket figures from a rollup view, or
// the same figures aggregated from port_samples FINAL, as text lines.
func rollupBuckets(t *testing.T, conn driver.Conn, query string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			bucket                                    time.Time
			node, device                              string
			port                                      uint16
			samples, rcv, xmit, symbolErrors, txPause uint64
			interval                                  int64
		)
		if err := rows.Scan(&bucket, &node, &device, &port, &samples, &interval, &rcv, &xmit, &symbolErrors, &txPause); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s/%s/%d samples=%d interval=%d rcv=%d xmit=%d symbol_errors=%d tx_pause_us=%d",
			bucket.UTC().Format(time.RFC3339), node, device, port, samples, interval, rcv, xmit, symbolErrors, txPause))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The same messages delivered twice (a sink killed between its INSERT and
// its ack: some messages fully inserted, some half, none acked) give
// rollups equal to the raw data under FINAL, bucket by bucket.
func TestSinkRedeliveryKeepsRollupsExact(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// 3 nodes x 10 batches x 4 ports, every 20 s across an hour boundary.
	t0 := time.Date(2026, 1, 1, 0, 57, 0, 0, time.UTC).UnixMilli()
	var batches []*schemas.CounterBatch
	for seq := uint64(1); seq <= 10; seq++ {
		for n := range 3 {
			b := batchAt(fmt.Sprintf("gpu-%03d", n), seq, 4, t0+int64(seq)*20_000)
			batches = append(batches, b)
			publishBatch(t, js, b, jetstream.WithMsgID(b.MsgID()))
		}
	}

	// The first sink: it fetched everything, inserted 15 messages whole and
	// 5 by half (its second block had not gone out), and died before
	// acking any.
	const consumer = "test-sink-counters"
	cons, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamCounters, jetstream.ConsumerConfig{
		Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Second, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := cons.Fetch(len(batches), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var landed []sink.SampleRow
	n := 0
	for m := range fetched.Messages() {
		b, err := schemas.DecodeBatch(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		rows := sink.SampleRows(b)
		switch {
		case n < 15:
			landed = append(landed, rows...)
		case n < 20:
			landed = append(landed, rows[:2]...)
		}
		n++
	}
	if n != len(batches) {
		t.Fatalf("fetched %d of %d", n, len(batches))
	}
	insertRows(t, conn, landed)

	// The next sink gets them again after the ack wait.
	cfg := fastConfig(dsn)
	cfg.AckWait = time.Second
	s, _ := runSink(t, js, conn, cfg)
	waitDrained(t, js, schemas.StreamCounters, consumer)
	waitCount(t, conn, "port_samples", "", uint64(len(batches)*4))

	// More duplicates than landed only when an INSERT of this sink failed
	// on the client's side and landed on the server (a loaded machine).
	if st := s.Stats()["port_samples"]; st.DuplicateRows < uint64(len(landed)) || st.Rows+st.DuplicateRows-uint64(len(landed)) != uint64(len(batches)*4-len(landed)) {
		t.Errorf("stats: %d duplicate rows skipped, %d inserted; want %d skipped and %d written", st.DuplicateRows, st.Rows, len(landed), len(batches)*4-len(landed))
	}
	var raw uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM port_samples").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if raw != uint64(len(batches)*4) {
		t.Errorf("port_samples holds %d rows before merging, want %d: a redelivered row was inserted again", raw, len(batches)*4)
	}

	waitRollupsEqualRaw(t, conn)
}

// waitRollupsEqualRaw waits (the sink rolls once no rows came in for a
// tick) until port_minute_v and port_hour_v hold, bucket by bucket, the
// sums over port_samples FINAL.
func waitRollupsEqualRaw(t *testing.T, conn driver.Conn) {
	t.Helper()
	const fromRaw = `SELECT %s AS bucket, node, device, port, count(), sum(interval_ms), sum(rcv_bytes), sum(xmit_bytes), sum(symbol_error), sum(tx_pause_duration_us)
		FROM port_samples FINAL WHERE first = 0 GROUP BY node, device, port, bucket ORDER BY node, device, port, bucket`
	const fromRollup = `SELECT %s, node, device, port, samples, interval_ms, rcv_bytes, xmit_bytes, symbol_errors, tx_pause_us
		FROM %s ORDER BY node, device, port, %s`
	for _, c := range []struct{ bucket, view, col string }{
		{"toStartOfMinute(ts)", "port_minute_v", "minute"},
		{"toStartOfHour(ts)", "port_hour_v", "hour"},
	} {
		want := rollupBuckets(t, conn, fmt.Sprintf(fromRaw, c.bucket))
		testwait.For(t, 30*time.Second, c.view+" equal to port_samples FINAL", func() error {
			got := rollupBuckets(t, conn, fmt.Sprintf(fromRollup, c.col, c.view, c.col))
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("%s differs from port_samples FINAL:\n%s\nwant\n%s", c.view, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			return nil
		})
	}
}

// A message with many ports goes in several INSERT blocks of at most
// BlockRows rows, and every row lands.
func TestSinkSplitsLargeMessageIntoBlocks(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.BlockRows = 16
	var blocks []int
	cfg.ObserveInsert = func(table string, rows int, took time.Duration, err error) {
		if table == "port_samples" && err == nil {
			blocks = append(blocks, rows)
		}
	}
	s, stop := runSink(t, js, conn, cfg)
	const ports = 100
	publishBatch(t, js, batchAt("gpu-big", 1, ports, 1767225600000))
	waitCount(t, conn, "port_samples", "node = 'gpu-big'", ports)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range blocks {
		if n > cfg.BlockRows {
			t.Errorf("a block of %d rows, BlockRows %d", n, cfg.BlockRows)
		}
		total += n
	}
	if len(blocks) != (ports+cfg.BlockRows-1)/cfg.BlockRows || total != ports {
		t.Errorf("blocks %v, want %d blocks holding %d rows", blocks, (ports+cfg.BlockRows-1)/cfg.BlockRows, ports)
	}
	if st := s.Stats()["port_samples"]; st.Inserts != uint64(len(blocks)) || st.Rows != ports || st.Acked != 1 {
		t.Errorf("stats %+v", st)
	}
}

// An INSERT of more rows than a chunk goes to the driver a chunk at a time
// (sampleBlocks.fill), and lands whole as one part: ClickHouse squashes the
// chunks of one INSERT before it writes (so they cost no more parts, and
// no more merges, than one block).
func TestSinkChunksLandAsOnePart(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	const messages, ports = 25, 1000
	rows := messages * ports
	if rows <= 2*sink.ChunkRows {
		t.Fatalf("%d rows make fewer than three chunks of %d", rows, sink.ChunkRows)
	}
	cfg := fastConfig(dsn)
	cfg.BatchRows, cfg.FlushInterval = rows, time.Minute // one flush, when every row is there
	var inserts []int
	cfg.ObserveInsert = func(table string, n int, took time.Duration, err error) {
		if table == "port_samples" && err == nil {
			inserts = append(inserts, n)
		}
	}
	for m := range messages {
		publishBatch(t, js, batchAt(fmt.Sprintf("gpu-%02d", m), 1, ports, 1767225600000))
	}
	_, stop := runSink(t, js, conn, cfg)
	waitCount(t, conn, "port_samples", "1", uint64(rows))
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(inserts) != 1 || inserts[0] != rows {
		t.Fatalf("inserts of %v rows, want one of %d", inserts, rows)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var parts, partRows uint64
	var maxLevel uint32
	if err := conn.QueryRow(ctx, "SELECT count(), sum(rows), max(level) FROM system.parts WHERE database = currentDatabase() AND table = 'port_samples' AND active").Scan(&parts, &partRows, &maxLevel); err != nil {
		t.Fatal(err)
	}
	if parts != 1 || partRows != uint64(rows) || maxLevel != 0 {
		t.Errorf("%d active parts holding %d rows, max level %d; want one unmerged part of %d rows", parts, partRows, maxLevel, rows)
	}
}

// The sink runs with no DDL rights (allow_ddl=0 on its DSN, which the
// driver passes as a setting of every query): it waits, not ready, naming
// the missing migrations, until an admin migrates, and then writes.
func TestSinkNeedsNoDDL(t *testing.T) {
	t.Parallel()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	admin := chtest.Open(t, dsn)
	restricted := dsn + "?allow_ddl=0"
	conn := chtest.Open(t, restricted)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE TABLE ddl_probe (a UInt8) ENGINE = Memory"); err == nil || !strings.Contains(err.Error(), "DDL queries are prohibited") {
		t.Fatalf("DDL through the restricted DSN: %v, want it prohibited", err)
	}
	js := startNATS(t)
	cfg := fastConfig(restricted)
	s, _ := runSink(t, js, conn, cfg)
	publishBatch(t, js, batchAt("gpu-001", 1, 2, 1767225600000))
	publishEvent(t, js, testEvent())
	publishInventory(t, js, testInventory())

	testwait.For(t, 10*time.Second, "the sink not ready, naming the migration", func() error {
		if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "rdmawatch migrate") {
			return fmt.Errorf("Ready() = %v before the migration, want not ready naming `rdmawatch migrate`", err)
		}
		return nil
	})
	// A few rounds of waiting, nothing created. A sleep: it proves that the
	// sink creates nothing in that time.
	time.Sleep(3 * cfg.RetryMax)
	if err := chdb.CheckSchema(ctx, admin); err == nil {
		t.Fatal("the sink created the schema")
	}
	if _, err := chdb.Migrate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the sink ready after the migration", s.Ready)
	waitCount(t, admin, "port_samples", "", 2)
	waitCount(t, admin, "events", "", 1)
	waitCount(t, admin, "inventory", "", 2)
}

// An INSERT that times out on the client's side but completes on the server
// (here every block takes 1.5 s, the timeout is 1 s) is not inserted again
// on the retry: the sink skips what landed. Rows land once; the rollups count
// them once. (On 18.16 the later, cancelled attempts did not land here even
// without the sink's wait for its failed query ids to leave
// system.processes, so this test does not isolate that wait.)
func TestSinkInsertTimeoutLandsOnce(t *testing.T) {
	t.Parallel()
	// 3 rows, and rows enough for three chunks (sampleBlocks.fill): the
	// INSERT that times out has sent all its chunks.
	for _, ports := range []int{3, 2*sink.ChunkRows + 100} {
		t.Run(fmt.Sprintf("%d rows", ports), func(t *testing.T) {
			t.Parallel()
			conn, dsn := migrated(t, chtest.DSN(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := conn.Exec(ctx, "ALTER TABLE port_samples ADD COLUMN slow_guard UInt8 MATERIALIZED sleep(1.5)"); err != nil {
				t.Fatal(err)
			}
			js := startNATS(t)
			cfg := fastConfig(dsn)
			cfg.InsertTimeout = time.Second
			cfg.AckWait = 3 * time.Second
			// One flush of every row: published before the sink starts,
			// flushed when the buffer is full.
			cfg.BatchRows, cfg.FlushInterval = ports, time.Minute
			for m := 0; m*1000 < ports; m++ { // messages of at most 1 000 ports
				publishBatch(t, js, batchAt(fmt.Sprintf("gpu-slow-%d", m), 1, min(1000, ports-m*1000), 1767225600000))
			}
			s, _ := runSink(t, js, conn, cfg)
			waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
			var raw, minute uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM port_samples").Scan(&raw); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 20*time.Second, "port_minute_v counting every sample", func() error {
				if err := conn.QueryRow(ctx, "SELECT sum(samples) FROM port_minute_v").Scan(&minute); err != nil || minute != uint64(ports) {
					return fmt.Errorf("port_minute_v: %d samples, %v", minute, err)
				}
				return nil
			})
			st := s.Stats()["port_samples"]
			t.Logf("stats %+v", st)
			if raw != uint64(ports) || minute != uint64(ports) || st.InsertErrors != 1 || st.DuplicateRows != uint64(ports) {
				t.Errorf("port_samples %d rows, port_minute %d samples, stats %+v: want %d and %d, the timed-out insert skipped on retry", raw, minute, st, ports, ports)
			}
		})
	}
}

// A message the sink holds longer than the ack wait (here it waits for a
// 3 s flush interval with a 1 s ack wait; a long insert or retries are the
// same) is not redelivered to another sink: it is kept in progress.
func TestSinkHeartbeatHoldsMessages(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.AckWait = time.Second
	cfg.FlushInterval = 3 * time.Second
	// Two sinks sharing the consumers: the idle one pulls all along, so a
	// message the other stopped heartbeating would be redelivered to it.
	a, _ := runSink(t, js, conn, cfg)
	b, _ := runSink(t, js, conn, cfg)
	publishBatch(t, js, batchAt("gpu-slow", 1, 2, 1767225600000))
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	waitCount(t, conn, "port_samples", "", 2)
	sa, sb := a.Stats()["port_samples"], b.Stats()["port_samples"]
	var raw uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM port_samples").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if sa.Acked+sb.Acked != 1 || raw != 2 {
		t.Errorf("held 3 s with a 1 s ack wait: the message was written %d times (%d raw rows): stats %+v and %+v", sa.Acked+sb.Acked, raw, sa, sb)
	}
}
