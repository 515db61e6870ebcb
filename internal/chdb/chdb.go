// Package chdb is rdmawatch's ClickHouse side of the SQL in schemas/ddl: it
// opens connections, applies the migrations (on one server or, rewritten, on
// a cluster), checks a database's schema for the sink, runs the shipped
// queries and the rollup rolls, drops expired partitions and loads the
// topology. The SQL itself lives in schemas/ddl, embedded into the binary, and
// is kept to what both Debian's 18.16 and current releases accept (see the
// "ClickHouse versions" section of docs/formats.md); features of newer servers go
// into migration variants gated on the server's version.
package chdb

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	redactpkg "github.com/rdmawatch/rdmawatch/internal/redact"
)

// dialAttempts and dialBackoff bound how long Open waits for a server that is
// still starting (local.sh, a container that came up together with the sink).
const (
	dialAttempts = 5
	dialBackoff  = 200 * time.Millisecond
)

// Open connects with the native protocol (18.16 cannot speak the driver's
// HTTP dialect) to the server and database the DSN names, e.g.
// clickhouse://127.0.0.1:19000/default. Every table rdmawatch creates or
// writes is unqualified, so the DSN's database is where they live.
func Open(ctx context.Context, dsn string, options ...Option) (driver.Conn, error) {
	opts, err := parseDSN(dsn, options)
	if err != nil {
		return nil, err
	}
	if opts.Protocol != ch.Native {
		return nil, fmt.Errorf("clickhouse dsn %q: only the native protocol (clickhouse://, port 9000-style) works with every supported server", redact(dsn))
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 5 * time.Second
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", strings.Join(opts.Addr, ","), err)
	}
	// clickhouse.Open does not dial; Ping does. Retry briefly so a server that
	// is still starting is not an error, but a wrong address fails fast enough.
	wait := dialBackoff
	for attempt := 1; ; attempt++ {
		err = conn.Ping(ctx)
		if err == nil {
			return conn, nil
		}
		var exc *ch.Exception
		if errors.As(err, &exc) || attempt == dialAttempts || ctx.Err() != nil {
			// A server exception (unknown database, bad password) will not
			// change by asking again.
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 2
	}
	conn.Close()
	return nil, fmt.Errorf("clickhouse %s database %q: %w", strings.Join(opts.Addr, ","), opts.Auth.Database, err)
}

// redact hides a password in a DSN before it goes into an error message.
func redact(dsn string) string { return redactpkg.String(dsn) }

// Option adjusts how Open connects beyond what the DSN says.
type Option func(*ch.Options) error

// ErrInvalidOption is the error of an Option that cannot apply.
var ErrInvalidOption = errors.New("clickhouse: invalid option")

// WithTLSCA verifies the server's certificate with the CA certificates
// (PEM) in file instead of the system's: a private CA. The DSN must ask
// for TLS (?secure=true).
func WithTLSCA(file string) Option {
	return func(o *ch.Options) error {
		if o.TLS == nil {
			return fmt.Errorf("%w: a TLS CA (%s) needs ?secure=true in the DSN", ErrInvalidOption, file)
		}
		pem, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("%w: TLS CA: %v", ErrInvalidOption, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%w: TLS CA %s: no PEM certificate", ErrInvalidOption, file)
		}
		o.TLS.RootCAs = pool
		return nil
	}
}

// parseDSN reads the DSN and applies the options; errors never quote a
// password.
func parseDSN(dsn string, options []Option) (*ch.Options, error) {
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("clickhouse dsn %q: %w", redact(dsn), redactpkg.Error(err))
	}
	for _, o := range options {
		if err := o(opts); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// Version is a server release, e.g. 18.16.1 or 24.8.4.
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion reads "18.16.1" or "24.8.4.13" (extra parts are ignored) and
// "19" or "20.3" (missing parts are 0).
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	var nums [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("clickhouse version %q: part %d is not a number", s, i+1)
		}
		nums[i] = n
	}
	return Version{nums[0], nums[1], nums[2]}, nil
}

// AtLeast reports whether v is the same release as o or a later one.
func (v Version) AtLeast(o Version) bool {
	if v.Major != o.Major {
		return v.Major > o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor > o.Minor
	}
	return v.Patch >= o.Patch
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ServerVersion asks the server for its release.
func ServerVersion(ctx context.Context, conn Conn) (Version, error) {
	var s string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&s); err != nil {
		return Version{}, fmt.Errorf("clickhouse server version: %w", err)
	}
	return ParseVersion(s)
}

// EnsureDatabase creates the DSN's database when it does not exist yet, so
// `rdmawatch migrate` (and the sink, which migrates first) works on a fresh
// server with a DSN like clickhouse://host:9000/rdmawatch.
func EnsureDatabase(ctx context.Context, dsn string, options ...Option) error {
	return ensureDatabase(ctx, dsn, "", options)
}

// EnsureDatabaseOnCluster is EnsureDatabase for cluster mode: it creates the
// DSN's database ON CLUSTER, on every node of the cluster.
func EnsureDatabaseOnCluster(ctx context.Context, dsn, cluster string, options ...Option) error {
	if !identRE.MatchString(cluster) {
		return fmt.Errorf("cluster %q: only letters, digits and '_' (not starting with a digit) are supported", cluster)
	}
	return ensureDatabase(ctx, dsn, cluster, options)
}

func ensureDatabase(ctx context.Context, dsn, cluster string, options []Option) error {
	opts, err := parseDSN(dsn, options)
	if err != nil {
		return err
	}
	db := opts.Auth.Database
	if db == "" || db == "default" {
		return nil
	}
	if strings.ContainsAny(db, "`\\") {
		return fmt.Errorf("clickhouse dsn %q: database name %q", redact(dsn), db)
	}
	opts.Auth.Database = "default"
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 5 * time.Second
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return fmt.Errorf("clickhouse %s: %w", strings.Join(opts.Addr, ","), err)
	}
	defer conn.Close()
	stmt := "CREATE DATABASE IF NOT EXISTS `" + db + "`"
	if cluster != "" {
		stmt += " ON CLUSTER " + cluster
	}
	if err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("clickhouse %s: create database %s: %w", strings.Join(opts.Addr, ","), db, ddlHint(err))
	}
	return nil
}
