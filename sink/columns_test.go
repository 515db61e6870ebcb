package sink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// portSampleTypes reads port_samples' column types from the migrations.
func portSampleTypes(t testing.TB) map[string]string {
	t.Helper()
	types := map[string]string{}
	re := regexp.MustCompile(`(?m)^\s*(?:ADD COLUMN\s+)?([a-z_0-9]+)\s+((?:Array\()?[A-Za-z0-9]+\)?)(?:\s+DEFAULT\s+\S+)?,?\s*$`)
	for _, f := range []string{"0001_port_samples.sql", "0004_port_samples_derived.sql"} {
		sql, err := os.ReadFile("../schemas/clickhouse/migrations/" + f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(sql), -1) {
			types[m[1]] = m[2]
		}
	}
	return types
}

// bareColumn adapts a column to columnAppender.
type bareColumn struct{ column.Interface }

func (c bareColumn) Append(v any) error { _, err := c.Interface.Append(v); return err }

func newColumns(t testing.TB) []column.Interface {
	t.Helper()
	types := portSampleTypes(t)
	cols := make([]column.Interface, len(SampleColumns))
	for i, name := range SampleColumns {
		typ, ok := types[name]
		if !ok {
			t.Fatalf("no type for column %s in the migrations", name)
		}
		c, err := column.Type(typ).Column(name, &column.ServerContext{Timezone: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	return cols
}

func encode(cols []column.Interface) [][]byte {
	out := make([][]byte, len(cols))
	for i, c := range cols {
		var buf chproto.Buffer
		c.Encode(&buf)
		out[i] = buf.Buf
	}
	return out
}

func testRows() []SampleRow {
	cd := func(src schemas.Source, name string, delta, value uint64, flags schemas.Flag) schemas.CounterDelta {
		return schemas.CounterDelta{Source: src, Name: name, Delta: delta, Value: value, Flags: flags}
	}
	b := &schemas.CounterBatch{
		Version: schemas.Version, Node: "gpu-017", BootID: "boot-a", Seq: 42, TimeMs: 1767225600500,
		Ports: []schemas.PortSample{
			{
				Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
				TimeMs: 1767225600123, IntervalMs: 1000,
				Counters: []schemas.CounterDelta{
					cd(schemas.SourceCounters, "port_rcv_data", 4000, 1000, 0),
					cd(schemas.SourceCounters, "port_xmit_data", 8000, 2000, 0),
					cd(schemas.SourceCounters, "symbol_error", 0, 65535, schemas.FlagSaturated),
					cd(schemas.SourceHWCounters, "np_cnp_sent", 11, 4294967290, schemas.FlagWrapped),
					cd(schemas.SourceEthtool, "rx_prio3_pause", 100, 1000, 0),
					cd(schemas.SourceEthtool, "tx_prio7_pause_duration", 30, 300, 0),
					cd(schemas.SourceEthtool, "rx_bits_phy", 1e12, 1e15, 0),
					cd(schemas.SourceEthtool, "rx_corrected_bits_phy", 12, 1e6, 0),
				},
				Gauges: map[string]uint64{"lifespan": 10, "a_gauge": 1},
			},
			{
				Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "ACTIVE", Rate: "400 Gb/sec (4X NDR)",
				TimeMs: -5, // clamped to 1970
				Counters: []schemas.CounterDelta{
					cd(schemas.SourceCounters, "port_rcv_data", 0, 5, schemas.FlagFirst),
				},
			},
			{Device: "mlx5_2", Port: 70000, TimeMs: 1 << 50, IntervalMs: 10}, // no counters; port and time clamped
		},
	}
	return SampleRows(b)
}

// The block built column by column is byte for byte the one built row by
// row from Values.
func TestAppendSampleColumnsMatchesValues(t *testing.T) {
	rows := testRows()
	byRow := newColumns(t)
	for i := range rows {
		block := proto.Block{Columns: byRow}
		if err := block.Append(rows[i].Values()...); err != nil {
			t.Fatal(err)
		}
	}
	byColumn := newColumns(t)
	if err := appendSampleColumns(func(i int) columnAppender { return bareColumn{byColumn[i]} }, rows); err != nil {
		t.Fatal(err)
	}
	want, got := encode(byRow), encode(byColumn)
	for i := range SampleColumns {
		if byColumn[i].Rows() != len(rows) {
			t.Errorf("column %s: %d rows, want %d", SampleColumns[i], byColumn[i].Rows(), len(rows))
		}
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("column %s: built column by column\n%x\nrow by row\n%x", SampleColumns[i], got[i], want[i])
		}
	}
}

// fakeMsg records what the sink did with a message.
type fakeMsg struct {
	jetstream.Msg
	acked, termed bool
}

func (m *fakeMsg) Data() []byte                              { return nil }
func (m *fakeMsg) Subject() string                           { return "rdmawatch.counters.x.y" }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return &jetstream.MsgMetadata{}, nil }
func (m *fakeMsg) Ack() error                                { m.acked = true; return nil }
func (m *fakeMsg) InProgress() error                         { return nil }
func (m *fakeMsg) TermWithReason(string) error               { m.termed = true; return nil }
func (m *fakeMsg) Nak() error                                { return nil }

// fakeConn hands out batches over bare columns; a column or row with the
// node "bad" is refused, as a driver refuses a value it cannot convert.
type fakeConn struct {
	driver.Conn
	t    *testing.T
	sent [][]column.Interface
}

func (c *fakeConn) PrepareBatch(context.Context, string, ...driver.PrepareBatchOption) (driver.Batch, error) {
	return &fakeBatch{conn: c, cols: newColumns(c.t)}, nil
}

type fakeBatch struct {
	driver.Batch
	conn *fakeConn
	cols []column.Interface
}

var errRefused = errors.New("refused")

type refusingColumn struct{ bareColumn }

func (c refusingColumn) Append(v any) error {
	if s, ok := v.([]string); ok && c.Name() == "node" && strings.Contains(strings.Join(s, ","), "bad") {
		return errRefused
	}
	return c.bareColumn.Append(v)
}

func (b *fakeBatch) Column(i int) driver.BatchColumn { return refusingColumn{bareColumn{b.cols[i]}} }
func (b *fakeBatch) Append(v ...any) error {
	if v[2] == "bad" {
		return errRefused
	}
	block := proto.Block{Columns: b.cols}
	return block.Append(v...)
}
func (b *fakeBatch) Abort() error { return nil }
func (b *fakeBatch) Close() error { return nil }
func (b *fakeBatch) Send() error {
	b.conn.sent = append(b.conn.sent, b.cols)
	return nil
}

// A row the driver refuses while the block is built column by column is
// found row by row: its message is terminated, the others are written and
// acked.
func TestFlushTerminatesRefusedRow(t *testing.T) {
	conn := &fakeConn{t: t}
	s := &Sink{conn: conn, cfg: Config{}.withDefaults(), log: slog.New(slog.DiscardHandler)}
	p := &pipeline[SampleRow]{s: s, table: "port_samples", columns: SampleColumns,
		values: (*SampleRow).Values, appendColumns: appendSampleColumns}
	rows := testRows()
	var b buffer[SampleRow]
	msgs := []*fakeMsg{{}, {}, {}}
	for i, m := range msgs {
		b.msgs = append(b.msgs, m)
		r := rows[i]
		if i == 1 {
			r.Node = "bad"
		}
		b.rows = append(b.rows, r, r)
		b.rowMsg = append(b.rowMsg, i, i)
	}
	if err := p.flush(context.Background(), s.log, &b); err != nil {
		t.Fatal(err)
	}
	if !msgs[0].acked || msgs[0].termed || msgs[1].acked || !msgs[1].termed || !msgs[2].acked || msgs[2].termed {
		t.Errorf("acked/termed: %v/%v %v/%v %v/%v, want only the second terminated",
			msgs[0].acked, msgs[0].termed, msgs[1].acked, msgs[1].termed, msgs[2].acked, msgs[2].termed)
	}
	if len(conn.sent) != 1 || conn.sent[0][0].Rows() != 4 {
		t.Fatalf("sent %d blocks, want one of 4 rows", len(conn.sent))
	}
	if len(b.msgs) != 0 || len(b.rows) != 0 {
		t.Errorf("buffer not emptied: %d messages, %d rows", len(b.msgs), len(b.rows))
	}
}

// BenchmarkBuildSampleBlock is the client-side cost of building a
// port_samples block of 10 000 rows (32 counters, 2 gauges each): row by row
// from Values (before), column by column (now). No ClickHouse needed.
//
//	go test -run '^$' -bench '^BenchmarkBuildSampleBlock$' -benchmem ./sink
func BenchmarkBuildSampleBlock(b *testing.B) {
	batch := &schemas.CounterBatch{Version: schemas.Version, Node: "gpu-017", BootID: "boot-a", Seq: 42, TimeMs: 1767225600500}
	for p := range 10_000 {
		ps := schemas.PortSample{Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE",
			Rate: "200 Gb/sec (4X HDR)", TimeMs: 1767225600123 + int64(p), IntervalMs: 1000,
			Gauges: map[string]uint64{"lifespan": 10, "temp": 55}}
		for k := range 32 {
			c := namedCounters[k%len(namedCounters)]
			ps.Counters = append(ps.Counters, schemas.CounterDelta{Source: c.source, Name: c.name,
				Delta: uint64(p*k) + 1000, Value: uint64(p*k) << 20})
		}
		batch.Ports = append(batch.Ports, ps)
	}
	rows := SampleRows(batch)
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			block := proto.Block{Columns: newColumns(b)}
			for i := range rows {
				if err := block.Append(rows[i].Values()...); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
	})
	b.Run("columns", func(b *testing.B) {
		for b.Loop() {
			cols := newColumns(b)
			if err := appendSampleColumns(func(i int) columnAppender { return bareColumn{cols[i]} }, rows); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
	})
}
