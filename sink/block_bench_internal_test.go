package sink

import (
	"context"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
)

// BenchmarkSampleBlocksFill: building a default flush (DefaultBatchRows
// rows) of a port_samples INSERT into the driver's columns and sending all
// its chunks but the last, the sink's side of an INSERT: a batch is
// prepared on a real server (the driver's columns need its block header),
// filled, and aborted (the server writes nothing).
//
//	RDMAWATCH_CLICKHOUSE=$(deploy/clickhouse/local.sh up | tail -n1) \
//	  go test -run '^$' -bench '^BenchmarkSampleBlocksFill$' -benchmem ./sink
func BenchmarkSampleBlocksFill(b *testing.B) {
	dsn := chtest.NewDatabase(b, chtest.DSN(b))
	conn := chtest.Open(b, dsn)
	ctx := context.Background()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		b.Fatal(err)
	}
	rows := manyRows(DefaultBatchRows)
	sb := newSampleBlocks()
	query := "INSERT INTO port_samples (" + strings.Join(SampleColumns, ", ") + ")"
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		batch, err := conn.PrepareBatch(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := sb.fill(batch, rows); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := batch.Abort(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
