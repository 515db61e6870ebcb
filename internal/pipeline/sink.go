package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// sinkFlushInterval is short: a run waits for the sink to drain before it
// ends, and nothing is gained by holding rows back for larger batches.
const sinkFlushInterval = 200 * time.Millisecond

// OpenSink creates the DSN's database, applies the migrations, loads the
// topology when given and returns the sink on js and a function that closes
// its connection.
func OpenSink(ctx context.Context, js jetstream.JetStream, dsn string, topo *schemas.Topology, log *slog.Logger) (*sink.Sink, func(), error) {
	if err := chdb.EnsureDatabase(ctx, dsn); err != nil {
		return nil, nil, err
	}
	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*sink.Sink, func(), error) {
		conn.Close()
		return nil, nil, err
	}
	applied, err := chdb.Migrate(ctx, conn)
	if err != nil {
		return fail(err)
	}
	for _, m := range applied {
		log.Info("clickhouse migration applied", "migration", m)
	}
	if topo != nil {
		if _, _, err := chdb.LoadTopology(ctx, conn, topo); err != nil {
			return fail(err)
		}
	}
	s, err := sink.New(js, conn, sink.Config{DSN: dsn, FlushInterval: sinkFlushInterval}, log)
	if err != nil {
		return fail(err)
	}
	return s, func() { conn.Close() }, nil
}
