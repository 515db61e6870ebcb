package chdb

import (
	"context"
	"fmt"
	"regexp"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// layout is where a database's rows live, read from the database itself so
// that retention and topology loading need no --cluster flag and cannot be
// given the wrong one: on the connected server (single-server mode), or on
// every node of a cluster in Replicated <name>_local tables under the
// Distributed <name> tables (cluster mode, see cluster.go). The mark is
// the one checkMode uses: cluster mode's schema_migrations is Distributed.
type layout struct {
	db      string
	cluster string // "": single-server mode
}

// distributedCluster reads the cluster out of a Distributed engine as
// system.tables shows it: Distributed('name', 'db', 'table', key), quoted
// or not depending on the server release.
var distributedCluster = regexp.MustCompile(`^Distributed\(\s*'?([A-Za-z_][A-Za-z0-9_]*)'?\s*,`)

// layoutOf reads the connection's database's layout. A database without
// schema_migrations (never migrated) reads as single-server mode.
func layoutOf(ctx context.Context, conn driver.Conn) (layout, error) {
	var l layout
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&l.db); err != nil {
		return l, fmt.Errorf("current database: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = @db AND name = @name",
		namedArg("db", l.db), namedArg("name", migrationsTable))
	if err != nil {
		return l, fmt.Errorf("read the engine of %s.%s: %w", l.db, migrationsTable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var engine, full string
		if err := rows.Scan(&engine, &full); err != nil {
			return l, fmt.Errorf("read the engine of %s.%s: %w", l.db, migrationsTable, err)
		}
		if engine != "Distributed" {
			continue
		}
		m := distributedCluster.FindStringSubmatch(full)
		if m == nil {
			return l, fmt.Errorf("%s.%s is Distributed but its engine %q names no cluster", l.db, migrationsTable, full)
		}
		l.cluster = m[1]
	}
	if err := rows.Err(); err != nil {
		return l, fmt.Errorf("read the engine of %s.%s: %w", l.db, migrationsTable, err)
	}
	return l, nil
}

// alter is the head of an ALTER on table's data: the table itself on one
// server; its <table>_local on every node of the cluster in cluster mode
// (a Distributed table has no partitions). On Replicated tables the server
// runs a DROP PARTITION on one replica per shard and replication carries it
// to the others, including a replica that is down now, when it returns.
func (l layout) alter(table string) string {
	if l.cluster == "" {
		return "ALTER TABLE " + table
	}
	return "ALTER TABLE " + l.db + "." + table + LocalSuffix + " ON CLUSTER " + l.cluster
}

// partsSource is where system.parts of the table's data is read: the
// connected server's, or one replica's of every shard through the
// cluster() table function (replicas hold the same partitions).
func (l layout) partsSource() string {
	if l.cluster == "" {
		return "system.parts"
	}
	return "cluster('" + l.cluster + "', system, parts)"
}

// dataTable is the name system.parts knows the table's data by.
func (l layout) dataTable(table string) string {
	if l.cluster == "" {
		return table
	}
	return table + LocalSuffix
}
