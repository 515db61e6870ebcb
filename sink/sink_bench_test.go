package sink_test

// Benchmark sink-insert of BENCHMARKS.md: rows per second the sink writes into
// ClickHouse (JetStream consume, decode, rows, PrepareBatch inserts), against
// clickhouse-client inserting the same rows in Native format. The rows are
// exported by clickhouse-client itself (SELECT ... FORMAT Native) from what
// the sink wrote; the table is truncated before each reference insert, so
// both write into the same table with the same materialized views. Wall
// time: the server's work is most of both.
//
//	RDMAWATCH_CLICKHOUSE=$(deploy/clickhouse/local.sh up | tail -n1) \
//	  go test -run '^$' -bench '^BenchmarkSinkInsert$' ./sink

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/sink"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

func BenchmarkSinkInsert(b *testing.B) {
	const (
		ports = 1000
		ticks = 30
	)
	client, err := exec.LookPath("clickhouse-client")
	if err != nil {
		b.Skipf("skipped: clickhouse-client (the reference) not found: %v", err)
	}
	dsn := chtest.NewDatabase(b, chtest.DSN(b))
	conn := chtest.Open(b, dsn)
	ctx := context.Background()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	chArgs := []string{"--host", u.Hostname(), "--port", u.Port(), "--database", db}
	if u.User != nil {
		chArgs = append(chArgs, "--user", u.User.Username())
		if pw, ok := u.User.Password(); ok {
			chArgs = append(chArgs, "--password", pw)
		}
	}
	ch := func(stdin []byte, query string) []byte {
		cmd := exec.Command(client, append(chArgs, "--query", query)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("clickhouse-client %q: %v: %s", query, err, stderr.Bytes())
		}
		return out
	}

	js, samples := bench.PublishFleet(b, ports, ticks)

	measure := func(b *testing.B, base sink.Config) {
		var oursWall, refWall time.Duration
		var rows, dup, retries uint64
		for range b.N {
			// Ours: a fresh sink (new consumers) over the whole stream.
			ch(nil, "TRUNCATE TABLE port_samples")
			cfg := base
			cfg.DSN, cfg.ConsumerPrefix = dsn, "bench-"+strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
			sk, err := sink.New(js, conn, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			t0 := time.Now()
			go func() { done <- sk.Run(rctx) }()
			if err := sk.WaitDrained(ctx); err != nil {
				b.Fatal(err)
			}
			oursWall += time.Since(t0)
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			// Redelivery under load shows here: rows checked again and
			// skipped, failed inserts retried.
			st := sk.Stats()["port_samples"]
			dup += st.DuplicateRows
			retries += st.Retries
			n, err := chtest.Count(ctx, conn, "port_samples", "")
			if err != nil {
				b.Fatal(err)
			}
			rows = n

			// The reference: the same rows, Native, through clickhouse-client.
			cols := strings.Join(sink.SampleColumns, ", ")
			native := ch(nil, "SELECT "+cols+" FROM port_samples FORMAT Native")
			path := filepath.Join(b.TempDir(), "rows.native")
			if err := os.WriteFile(path, native, 0o644); err != nil {
				b.Fatal(err)
			}
			ch(nil, "TRUNCATE TABLE port_samples")
			t0 = time.Now()
			ch(native, "INSERT INTO port_samples ("+cols+") FORMAT Native")
			refWall += time.Since(t0)
			if n, err := chtest.Count(ctx, conn, "port_samples", ""); err != nil || n != rows {
				b.Fatalf("reference inserted %d rows (%v), the sink %d", n, err, rows)
			}
		}
		if rows != uint64(samples) {
			b.Fatalf("%d rows in port_samples, %d port-samples published", rows, samples)
		}
		total := float64(b.N) * float64(rows)
		b.ReportMetric(total/oursWall.Seconds(), "sink-rows/s")
		b.ReportMetric(total/refWall.Seconds(), "clickhouse-client-rows/s")
		b.ReportMetric(refWall.Seconds()/oursWall.Seconds(), "sink/clickhouse-client")
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(float64(dup)/float64(b.N), "dup-rows")
		b.ReportMetric(float64(retries)/float64(b.N), "retries")
	}

	// default: the sink's default config (10 000-row batches, at most 1000
	// messages in flight, so 8000-row inserts here, and a 1 s flush
	// interval). bulk: a catch-up/bulk-load setting, batches big enough
	// that the 30 000 rows go in one INSERT like the reference's.
	b.Run("default", func(b *testing.B) { measure(b, sink.Config{}) })
	b.Run("bulk", func(b *testing.B) { measure(b, sink.Config{BatchRows: 50_000, MaxAckPending: 10_000}) })
}
