package chdb

import (
	"context"
	"fmt"
	"regexp"
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
	shards  int    // the cluster's shards (system.clusters)
}

// distributedCluster reads the cluster out of a Distributed engine as
// system.tables shows it: Distributed('name', 'db', 'table', key), quoted
// or not depending on the server release.
var distributedCluster = regexp.MustCompile(`^Distributed\(\s*'?([A-Za-z_][A-Za-z0-9_]*)'?\s*,`)

// layoutOf reads the connection's database's layout. A database without
// schema_migrations (never migrated) reads as single-server mode.
func layoutOf(ctx context.Context, conn Conn) (layout, error) {
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
	if l.cluster != "" {
		var shards uint64
		if err := conn.QueryRow(ctx, "SELECT uniqExact(shard_num) FROM system.clusters WHERE cluster = @c", namedArg("c", l.cluster)).Scan(&shards); err != nil {
			return l, fmt.Errorf("shards of cluster %s: %w", l.cluster, err)
		}
		if shards == 0 {
			return l, fmt.Errorf("%s.%s is Distributed over cluster %s, which this server's remote_servers does not name", l.db, migrationsTable, l.cluster)
		}
		l.shards = int(shards)
	}
	return l, nil
}

// alter is the head of an ALTER that drops partitions of table's data:
// the table itself on one server; in cluster mode its <table>_local (a
// Distributed table has no partitions). A Replicated table replicates a
// DROP PARTITION to the other replicas of its shard, a replica down now
// included when it returns: so on a cluster of one shard the statement
// runs on the connected replica alone, without the distributed DDL queue
// (on 18.16 an ALTER ON CLUSTER of a Replicated table waits, up to an
// hour, for a replica that is its table's leader to take it, and every
// later ON CLUSTER statement waits behind it: seen once in four runs of
// test/cluster). With several shards it runs ON CLUSTER, which reaches
// every shard.
func (l layout) alter(table string) string {
	switch {
	case l.cluster == "":
		return "ALTER TABLE " + table
	case l.shards == 1:
		return "ALTER TABLE " + l.db + "." + table + LocalSuffix
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
