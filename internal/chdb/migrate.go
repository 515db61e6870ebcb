package chdb

import (
	"context"
	"errors"
	"fmt"
	"github.com/rdmawatch/rdmawatch/schemas/ddl"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Migration files are migrations/NNNN_name.sql, applied in NNNN order, each
// at most once per database; schema_migrations records which were applied.
//
// Variants: several files may share a number. A file may start with header
// lines "-- requires: 20.3" naming the oldest server release it runs on (no
// header: any release). Migrate applies, per number, the variant with the
// highest requirement the server meets, so DDL that needs codecs or TTL sits
// next to an 18.16-safe variant of the same step. When no variant fits, the
// number is skipped and not recorded: it applies once the server is upgraded.
//
// A file holds one or more statements, each ending with ';' at the end of a
// line (the native protocol runs one statement per query). DDL uses IF NOT
// EXISTS so a step that failed half-way, or two migrators racing, can simply
// run again.
//
// The files are schemas/ddl.Migrations.
var migrationFS = ddl.Migrations

const migrationsTable = "schema_migrations"

var (
	fileRE     = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)(\.[a-z0-9_.]+)?\.sql$`)
	requiresRE = regexp.MustCompile(`^--\s*requires:\s*(\S+)\s*$`)
	optionalRE = regexp.MustCompile(`^--\s*optional\b`)
)

// migration is one file.
type migration struct {
	version  uint32
	file     string  // file name, recorded in schema_migrations.name
	requires Version // oldest server the file runs on
	// optional ("-- optional" header): tuning the schema works without; a
	// failure is logged and the migration retried on the next run.
	optional bool
	stmts    []string
}

// Migrate applies every embedded migration the database has not seen, in
// order, and returns the names of the files it applied (none on a second
// run). It works in the connection's database, the one the DSN names.
func Migrate(ctx context.Context, conn Conn) (applied []string, err error) {
	server, err := ServerVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	return migrate(ctx, conn, migrationFS, "migrations", server)
}

// MigrateCluster is Migrate in cluster mode (cluster.go): every statement
// runs ON CLUSTER c.Name, MergeTree tables become Replicated *_local tables
// under Distributed ones that keep the user-facing names. The connection's
// database must have the same name on every node (EnsureDatabaseOnCluster).
// A database migrated in one mode is refused by the other.
func MigrateCluster(ctx context.Context, conn Conn, c Cluster) (applied []string, err error) {
	server, err := ServerVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&db); err != nil {
		return nil, fmt.Errorf("migrate: current database: %w", err)
	}
	rw, err := newRewriter(migrationFS, "migrations", c, db)
	if err != nil {
		return nil, err
	}
	return migrateWith(ctx, conn, migrationFS, "migrations", server, rw)
}

func newRewriter(fsys fs.FS, dir string, c Cluster, db string) (*clusterRewriter, error) {
	all, err := parseAll(fsys, dir)
	if err != nil {
		return nil, err
	}
	return newClusterRewriter(c, db, viewNames(all))
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS ` + migrationsTable + ` (
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = MergeTree() ORDER BY version`

func migrate(ctx context.Context, conn Conn, fsys fs.FS, dir string, server Version) ([]string, error) {
	return migrateWith(ctx, conn, fsys, dir, server, nil)
}

// migrateWith runs the plan as written, or rewritten by rw (cluster mode).
func migrateWith(ctx context.Context, conn Conn, fsys fs.FS, dir string, server Version, rw *clusterRewriter) ([]string, error) {
	plan, err := plan(fsys, dir, server)
	if err != nil {
		return nil, err
	}
	bootstrap := []string{createMigrationsTable}
	recordCtx := ctx
	if rw != nil {
		// Rewrite everything before running anything: a statement the
		// rewriter does not know fails the run before it changes the schema.
		if bootstrap, err = rw.rewrite(createMigrationsTable); err != nil {
			return nil, err
		}
		for i := range plan {
			var stmts []string
			for j, stmt := range plan[i].stmts {
				out, err := rw.rewrite(stmt)
				if err != nil {
					return nil, fmt.Errorf("migrate: %s statement %d: %w", plan[i].file, j+1, err)
				}
				stmts = append(stmts, out...)
			}
			plan[i].stmts = stmts
		}
		// The record goes through the Distributed schema_migrations: wait
		// until its shard has it, so the next run sees it.
		recordCtx = ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
	}
	if err := checkMode(ctx, conn, rw != nil); err != nil {
		return nil, err
	}
	for _, stmt := range bootstrap {
		if err := conn.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("migrate: create %s: %w", migrationsTable, err)
		}
	}
	done, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range plan {
		if done[m.version] {
			continue
		}
		failed := false
		for i, stmt := range m.stmts {
			if err := execRacing(ctx, conn, stmt); err != nil && !columnsExist(stmt, err) && !createdMeanwhile(stmt, err) {
				if !m.optional {
					return applied, fmt.Errorf("migrate: %s statement %d (server %s): %w", m.file, i+1, server, err)
				}
				// Storage tuning the schema works without (codecs, TTL on
				// newer servers): say so and go on; it is not recorded, so
				// the next migrate tries again.
				slog.Warn("clickhouse: optional migration not applied; the tables work without it", "migration", m.file, "statement", i+1, "server", server.String(), "err", err)
				failed = true
				break
			}
		}
		if failed {
			continue
		}
		if err := record(recordCtx, conn, m); err != nil {
			return applied, err
		}
		applied = append(applied, m.file)
	}
	return applied, nil
}

// checkMode refuses to migrate a database in the other mode than the one it
// was created in: cluster mode's schema_migrations is a Distributed table.
func checkMode(ctx context.Context, conn Conn, cluster bool) error {
	rows, err := conn.Query(ctx, "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = '"+migrationsTable+"'")
	if err != nil {
		return fmt.Errorf("migrate: read %s engine: %w", migrationsTable, err)
	}
	defer rows.Close()
	var engine string
	for rows.Next() {
		if err := rows.Scan(&engine); err != nil {
			return fmt.Errorf("migrate: read %s engine: %w", migrationsTable, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: read %s engine: %w", migrationsTable, err)
	}
	switch {
	case engine == "":
		return nil
	case cluster && engine != "Distributed":
		return fmt.Errorf("migrate: this database was migrated in single-server mode (%s is %s): cluster mode needs a database of its own; converting is not supported", migrationsTable, engine)
	case !cluster && engine == "Distributed":
		return fmt.Errorf("migrate: this database was migrated in cluster mode (%s is Distributed): pass --cluster with the cluster's name", migrationsTable)
	}
	return nil
}

// columnsExist reports whether err says an ALTER TABLE ... ADD COLUMN found
// its column already there: 18.16 has no ADD COLUMN IF NOT EXISTS, so a step
// that was cut short after its ALTER ran must be able to run again. An ALTER
// with several ADD COLUMNs is checked as a whole before it changes anything,
// so one existing column means the ALTER had run.
func columnsExist(stmt string, err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) || (exc.Code != codeIllegalColumn && exc.Code != codeDuplicateColumn) {
		return false
	}
	upper := strings.ToUpper(stmt)
	return strings.HasPrefix(strings.TrimSpace(upper), "ALTER TABLE") && strings.Contains(upper, "ADD COLUMN") &&
		strings.Contains(exc.Message, "already exists")
}

// execRacing runs stmt, again while it fails as an ALTER ... ADD COLUMN
// racing another migrator's: 18.16 then answers MULTIPLE_EXPRESSIONS_FOR_ALIAS
// about its own temporary aliases (seen with four migrators at once). Run
// again once the other is done, the ALTER finds its columns there.
func execRacing(ctx context.Context, conn Conn, stmt string) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = conn.Exec(ctx, stmt); !alterRaced(stmt, err) {
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

func alterRaced(stmt string, err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) || exc.Code != codeMultipleAliases {
		return false
	}
	upper := strings.ToUpper(strings.TrimSpace(stmt))
	return strings.HasPrefix(upper, "ALTER TABLE") && strings.Contains(upper, "ADD COLUMN")
}

// createdMeanwhile reports whether err is a CREATE ... IF NOT EXISTS that
// lost a race with another migrator creating the same table or view: the
// server checks for the name, then creates, and two `rdmawatch migrate`
// (or sinks of old releases) starting together both pass the check.
func createdMeanwhile(stmt string, err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) || exc.Code != codeTableAlreadyExists {
		return false
	}
	upper := strings.ToUpper(strings.Join(strings.Fields(stmt), " "))
	return strings.HasPrefix(upper, "CREATE ") && strings.Contains(upper, " IF NOT EXISTS ")
}

// Server error codes (ErrorCodes.cpp): 18.16 reports an existing column as
// ILLEGAL_COLUMN, newer releases as DUPLICATE_COLUMN.
const (
	codeDuplicateColumn    = 15
	codeIllegalColumn      = 44
	codeTableAlreadyExists = 57
	codeUnknownTable       = 60
	codeMultipleAliases    = 179
)

// ErrSchemaNotReady is wrapped by CheckSchema's error when a migration the
// code needs has not been applied.
var ErrSchemaNotReady = errors.New("clickhouse schema not migrated")

// CheckSchema returns nil when the connection's database has every
// migration this release needs on this server (the optional ones aside),
// else an error naming the missing files. It only reads (schema_migrations,
// version()), so a role without DDL rights can ask; `rdmawatch migrate` as
// an admin is what applies them.
func CheckSchema(ctx context.Context, conn Conn) error {
	server, err := ServerVersion(ctx, conn)
	if err != nil {
		return err
	}
	return checkSchema(ctx, conn, migrationFS, "migrations", server)
}

func checkSchema(ctx context.Context, conn Conn, fsys fs.FS, dir string, server Version) error {
	plan, err := plan(fsys, dir, server)
	if err != nil {
		return err
	}
	done, err := appliedVersions(ctx, conn)
	var exc *ch.Exception
	if errors.As(err, &exc) && exc.Code == codeUnknownTable {
		return fmt.Errorf("%w: no %s table in this database: run `rdmawatch migrate` as an admin", ErrSchemaNotReady, migrationsTable)
	}
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range plan {
		if !m.optional && !done[m.version] {
			missing = append(missing, m.file)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s on ClickHouse %s: run `rdmawatch migrate` as an admin", ErrSchemaNotReady, strings.Join(missing, ", "), server)
	}
	return nil
}

func appliedVersions(ctx context.Context, conn Conn) (map[uint32]bool, error) {
	rows, err := conn.Query(ctx, "SELECT version FROM "+migrationsTable)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
	}
	defer rows.Close()
	done := map[uint32]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
		}
		done[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
	}
	return done, nil
}

func record(ctx context.Context, conn Conn, m migration) error {
	// An explicit column list: 18.16 rejects the driver's column-less INSERT.
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+migrationsTable+" (version, name, applied_at)")
	if err != nil {
		return fmt.Errorf("migrate: record %s: %w", m.file, err)
	}
	defer b.Close()
	if err := b.Append(m.version, m.file, time.Now().UTC().Truncate(time.Second)); err != nil {
		return fmt.Errorf("migrate: record %s: %w", m.file, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("migrate: record %s: %w", m.file, err)
	}
	return nil
}

// MigrationStatements returns the statements of one shipped migration file
// (e.g. "0005_rollups.sql"), comments dropped, as Migrate runs them: for a
// benchmark that rebuilds an older schema from the file's own text.
func MigrationStatements(file string) ([]string, error) {
	m, err := parseMigration(migrationFS, path.Join("migrations", file))
	if err != nil {
		return nil, err
	}
	return m.stmts, nil
}

// plan reads the migration files and picks, per number, the variant the
// server can run, in number order.
func plan(fsys fs.FS, dir string, server Version) ([]migration, error) {
	all, err := parseAll(fsys, dir)
	if err != nil {
		return nil, err
	}
	best := map[uint32]migration{}
	for _, m := range all {
		if !server.AtLeast(m.requires) {
			continue
		}
		if cur, ok := best[m.version]; ok {
			if cur.requires == m.requires {
				return nil, fmt.Errorf("migrate: %s and %s both number %04d for servers from %s", cur.file, m.file, m.version, m.requires)
			}
			if cur.requires.AtLeast(m.requires) {
				continue
			}
		}
		best[m.version] = m
	}
	out := make([]migration, 0, len(best))
	for _, m := range best {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// parseAll reads every migration file of dir, every variant, in name order.
func parseAll(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrate: list %s: %w", dir, err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m, err := parseMigration(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func parseMigration(fsys fs.FS, name string) (migration, error) {
	base := path.Base(name)
	match := fileRE.FindStringSubmatch(base)
	if match == nil {
		return migration{}, fmt.Errorf("migrate: %s: file name is not NNNN_name.sql", name)
	}
	n, _ := strconv.ParseUint(match[1], 10, 32) // four digits always fit
	if n == 0 {
		return migration{}, fmt.Errorf("migrate: %s: numbers start at 0001", name)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return migration{}, fmt.Errorf("migrate: %w", err)
	}
	m := migration{version: uint32(n), file: base}
	var stmt strings.Builder
	header := true
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			if header && optionalRE.MatchString(trimmed) {
				m.optional = true
			}
			if req := requiresRE.FindStringSubmatch(trimmed); req != nil {
				if !header {
					return migration{}, fmt.Errorf("migrate: %s line %d: requires header after the first statement began", name, i+1)
				}
				v, err := ParseVersion(req[1])
				if err != nil {
					return migration{}, fmt.Errorf("migrate: %s line %d: %w", name, i+1, err)
				}
				m.requires = v
			}
			// Comment lines are dropped so a statement never is only a comment.
			continue
		}
		if trimmed == "" && stmt.Len() == 0 {
			continue
		}
		header = false
		stmt.WriteString(line)
		stmt.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			s := strings.TrimSuffix(strings.TrimSpace(stmt.String()), ";")
			m.stmts = append(m.stmts, s)
			stmt.Reset()
		}
	}
	if rest := strings.TrimSpace(stmt.String()); rest != "" {
		m.stmts = append(m.stmts, rest)
	}
	if len(m.stmts) == 0 {
		return migration{}, fmt.Errorf("migrate: %s: no statements", name)
	}
	return m, nil
}
