package chdb

import (
	"context"
	"io/fs"
	"strconv"
	"testing/fstest"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// LocalCluster is a Cluster that a server without ZooKeeper can run: with
// unreplicated the MergeTree engines stay unreplicated, with local the
// statements run without ON CLUSTER on the connected server only.
func LocalCluster(name string, unreplicated, local bool) Cluster {
	return Cluster{Name: name, unreplicated: unreplicated, local: local}
}

// ClusterStatements is what MigrateCluster would run on a server of this
// version in database db: schema_migrations, then every planned file.
func ClusterStatements(c Cluster, db string, server Version) ([]string, error) {
	rw, err := newRewriter(migrationFS, "migrations", c, db)
	if err != nil {
		return nil, err
	}
	out, err := rw.rewrite(createMigrationsTable)
	if err != nil {
		return nil, err
	}
	p, err := plan(migrationFS, "migrations", server)
	if err != nil {
		return nil, err
	}
	for _, m := range p {
		for _, s := range m.stmts {
			r, err := rw.rewrite(s)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
	}
	return out, nil
}

// MigrateUpTo applies the migrations numbered up to last, as a database of
// an older release had them.
func MigrateUpTo(ctx context.Context, conn driver.Conn, last uint32) ([]string, error) {
	server, err := ServerVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	all, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	older := fstest.MapFS{}
	for _, e := range all {
		if n, err := strconv.ParseUint(e.Name()[:4], 10, 32); err != nil || uint32(n) > last {
			continue
		}
		data, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		older["migrations/"+e.Name()] = &fstest.MapFile{Data: data}
	}
	return migrate(ctx, conn, older, "migrations", server)
}
