package chdb

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Conn is what rdmawatch's ClickHouse code uses of a connection: the seam
// between that code and the server. clickhouse-go's driver.Conn (the native
// protocol, what the product runs) satisfies it, and so does the chDB
// library (ClickHouse 26.x in process, internal/chdb/chdblib, tests only),
// so migrations, rollups, retention, topology loading and every report
// read run unchanged on Debian's 18.16 and on a current release.
//
// Rows, Row and Batch stay clickhouse-go's interfaces: scanning into Go
// values, Append and Send are what the code relies on, not the protocol.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) error
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
	// PrepareBatch takes "INSERT INTO table (columns)": always an explicit
	// column list (18.16 rejects the column-less form).
	PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error)
	Close() error
}

// The product's connections are the native protocol's.
var _ Conn = driver.Conn(nil)
