package chdb

import (
	"fmt"
	"regexp"
	"strings"
)

// Cluster mode (`rdmawatch migrate --cluster NAME`) runs the same migration
// files on a ClickHouse cluster: every statement is rewritten by
// clusterRewriter before it runs, the files themselves stay single-server
// DDL. Naming: the user-facing name (port_samples, events, ...) is the
// Distributed table, so the sink, the query catalog and the views read and
// write it unchanged; the data lives in <name>_local on every node:
//
//	CREATE TABLE t (...) ENGINE = ReplacingMergeTree(v) ...
//	→ CREATE TABLE db.t_local ON CLUSTER c (...)
//	      ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/t', '{replica}', v) ...
//	  CREATE TABLE db.t ON CLUSTER c AS db.t_local
//	      ENGINE = Distributed('c', 'db', 't_local', <sharding key>)
//
// Materialized views are created on the local tables (they read
// <source>_local and write TO <target>_local on each node, so a rollup row
// lands on the shard of its raw rows); plain views keep reading the
// Distributed names. ALTER TABLE t goes to t_local; its column clauses (ADD,
// DROP, MODIFY, RENAME COLUMN, codecs left out) also go to the Distributed t
// so its columns follow. Every table name is qualified with the database:
// ON CLUSTER DDL runs on the other nodes in their default database.

// DefaultZooKeeperPath is where replicated tables keep their metadata; the
// table name is appended. {shard} and {replica} are the servers' macros.
const DefaultZooKeeperPath = "/clickhouse/tables/{shard}/rdmawatch"

// Cluster selects cluster mode for MigrateCluster.
type Cluster struct {
	// Name is a cluster of the servers' <remote_servers>.
	Name string
	// ZooKeeperPath replaces DefaultZooKeeperPath, e.g. so two rdmawatch
	// databases can live on one cluster.
	ZooKeeperPath string

	// For tests on a server without ZooKeeper (export_test.go): unreplicated
	// keeps the MergeTree engines as they are, local leaves ON CLUSTER out
	// (the statements run on the connected server only).
	unreplicated, local bool
}

// ShardingKeys is the Distributed sharding key of every table rdmawatch
// creates: port samples, inventory and rollups by node (a node's raw rows
// and its rollup rows share a shard, and ReplacingMergeTree duplicates meet
// in one shard), events by incident id (all revisions of an incident in one
// shard). A migration that creates a table not listed here fails to
// rewrite, so a new table has to choose its key.
var ShardingKeys = map[string]string{
	migrationsTable: "version",
	"port_samples":  "cityHash64(node)",
	"events":        "cityHash64(id)",
	"inventory":     "cityHash64(node)",
	"port_minute":   "cityHash64(node)",
	"port_hour":     "cityHash64(node)",
	"rollup_minute": "cityHash64(node)",
	"rollup_hour":   "cityHash64(node)",
	"rollup_day":    "cityHash64(node)",
	// A group's rows of every roll on one shard, so FINAL and trends'
	// newest-roll filter see them together.
	"rollup_day_group": "cityHash64(grp)",
	"topology_ports":   "cityHash64(node)",
	"topology_links":   "cityHash64(a)",
	"port_config":      "cityHash64(node)",
}

// LocalSuffix names the per-node table under a Distributed one.
const LocalSuffix = "_local"

var (
	identRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	createTableRE = regexp.MustCompile(`^CREATE TABLE (IF NOT EXISTS )?([A-Za-z_][A-Za-z0-9_]*)\s*\n?`)
	createMVRE    = regexp.MustCompile(`^CREATE MATERIALIZED VIEW (IF NOT EXISTS )?([A-Za-z_][A-Za-z0-9_]*) TO ([A-Za-z_][A-Za-z0-9_]*) AS\b`)
	createViewRE  = regexp.MustCompile(`^CREATE VIEW (IF NOT EXISTS )?([A-Za-z_][A-Za-z0-9_]*) AS\b`)
	alterRE       = regexp.MustCompile(`^ALTER TABLE ([A-Za-z_][A-Za-z0-9_]*)(\s+)`)
	insertRE      = regexp.MustCompile(`^INSERT INTO ([A-Za-z_][A-Za-z0-9_]*)(\s*\([^()]*\))?\s*\n\s*SELECT\b`)
	dropViewRE    = regexp.MustCompile(`^DROP TABLE IF EXISTS ([A-Za-z_][A-Za-z0-9_]*)$`)
	engineRE      = regexp.MustCompile(`\bENGINE = ([A-Za-z]*MergeTree)\(`)
	tableRefRE    = regexp.MustCompile(`(?i)\b(ARRAY\s+)?(FROM|JOIN)(\s+)([A-Za-z_][A-Za-z0-9_]*)\b([ \t]*[.(]?)`)
	columnClause  = regexp.MustCompile(`(?i)^(ADD|DROP|MODIFY|RENAME) COLUMN\b`)
	codecRE       = regexp.MustCompile(`(?i)\s+CODEC\(`)
)

// ddlHint explains the error a server without distributed DDL (no
// ZooKeeper/Keeper, no <distributed_ddl>) gives for ON CLUSTER.
func ddlHint(err error) error {
	if err != nil && strings.Contains(err.Error(), "DDL background thread is not initialized") {
		return fmt.Errorf("%w (ON CLUSTER needs distributed DDL: ZooKeeper or ClickHouse Keeper and <distributed_ddl> in every server's config)", err)
	}
	return err
}

// clusterRewriter rewrites single-server statements for a cluster.
type clusterRewriter struct {
	c     Cluster
	db    string
	views map[string]bool // view names, qualified like tables in SELECTs
}

func newClusterRewriter(c Cluster, database string, views []string) (*clusterRewriter, error) {
	if !identRE.MatchString(c.Name) {
		return nil, fmt.Errorf("cluster %q: only letters, digits and '_' (not starting with a digit) are supported", c.Name)
	}
	if !identRE.MatchString(database) {
		return nil, fmt.Errorf("cluster mode: database %q: only letters, digits and '_' (not starting with a digit) are supported", database)
	}
	if c.ZooKeeperPath == "" {
		c.ZooKeeperPath = DefaultZooKeeperPath
	}
	if strings.ContainsAny(c.ZooKeeperPath, `'\`) || !strings.HasPrefix(c.ZooKeeperPath, "/") {
		return nil, fmt.Errorf("cluster mode: zookeeper path %q must start with '/' and hold no quotes", c.ZooKeeperPath)
	}
	c.ZooKeeperPath = strings.TrimSuffix(c.ZooKeeperPath, "/")
	rw := &clusterRewriter{c: c, db: database, views: map[string]bool{}}
	for _, v := range views {
		rw.views[v] = true
	}
	return rw, nil
}

// viewNames lists the views the migration files create, so a view reading
// another view is qualified too.
func viewNames(ms []migration) []string {
	var out []string
	for _, m := range ms {
		for _, s := range m.stmts {
			if v := createViewRE.FindStringSubmatch(s); v != nil {
				out = append(out, v[2])
			} else if v := createMVRE.FindStringSubmatch(s); v != nil {
				out = append(out, v[2])
			}
		}
	}
	return out
}

func (rw *clusterRewriter) onCluster() string {
	if rw.c.local {
		return ""
	}
	return " ON CLUSTER " + rw.c.Name
}

func (rw *clusterRewriter) q(name string) string { return rw.db + "." + name }

// rewrite turns one single-server statement into the cluster statements
// that replace it, in order.
func (rw *clusterRewriter) rewrite(stmt string) ([]string, error) {
	switch {
	case createTableRE.MatchString(stmt):
		return rw.createTable(stmt)
	case createMVRE.MatchString(stmt):
		m := createMVRE.FindStringSubmatch(stmt)
		head := "CREATE MATERIALIZED VIEW " + m[1] + rw.q(m[2]) + rw.onCluster() + " TO " + rw.q(m[3]+LocalSuffix) + " AS"
		if _, ok := ShardingKeys[m[3]]; !ok {
			return nil, fmt.Errorf("cluster mode: materialized view %s writes to %s, which has no sharding key (ShardingKeys)", m[2], m[3])
		}
		return []string{head + rw.tableRefs(stmt[len(m[0]):], true)}, nil
	case createViewRE.MatchString(stmt):
		m := createViewRE.FindStringSubmatch(stmt)
		head := "CREATE VIEW " + m[1] + rw.q(m[2]) + rw.onCluster() + " AS"
		return []string{head + rw.tableRefs(stmt[len(m[0]):], false)}, nil
	case alterRE.MatchString(stmt):
		return rw.alter(stmt)
	case insertRE.MatchString(stmt):
		// A migration that carries rows over (0012): through the
		// Distributed tables, so every row lands on its shard.
		name := insertRE.FindStringSubmatch(stmt)[1]
		if _, ok := ShardingKeys[name]; !ok {
			return nil, fmt.Errorf("cluster mode: INSERT INTO %s: not a table rdmawatch distributes (ShardingKeys)", name)
		}
		rest := stmt[len("INSERT INTO "+name):]
		return []string{"INSERT INTO " + rw.q(name) + rw.tableRefs(rest, false)}, nil
	case dropViewRE.MatchString(stmt):
		// Only a view is dropped by a migration (to create it again with
		// new columns); a table's rows would be lost.
		name := dropViewRE.FindStringSubmatch(stmt)[1]
		if !rw.views[name] {
			return nil, fmt.Errorf("cluster mode: DROP of %s: migrations drop only views", name)
		}
		return []string{"DROP TABLE IF EXISTS " + rw.q(name) + rw.onCluster()}, nil
	}
	first, _, _ := strings.Cut(stmt, "\n")
	return nil, fmt.Errorf("cluster mode: no rewrite for statement %q", first)
}

func (rw *clusterRewriter) createTable(stmt string) ([]string, error) {
	m := createTableRE.FindStringSubmatch(stmt)
	ifNot, name := m[1], m[2]
	key, ok := ShardingKeys[name]
	if !ok {
		return nil, fmt.Errorf("cluster mode: table %s has no sharding key: add it to ShardingKeys", name)
	}
	rest := stmt[len(m[0]):]
	e := engineRE.FindStringSubmatchIndex(rest)
	if e == nil {
		return nil, fmt.Errorf("cluster mode: table %s: no MergeTree-family \"ENGINE = XMergeTree(...)\" line", name)
	}
	engine := rest[e[2]:e[3]]
	argsStart := e[1] // just after '('
	argsEnd := closingParen(rest, argsStart-1)
	if argsEnd < 0 {
		return nil, fmt.Errorf("cluster mode: table %s: unbalanced engine arguments", name)
	}
	args := strings.TrimSpace(rest[argsStart:argsEnd])
	if !rw.c.unreplicated {
		repl := "'" + rw.c.ZooKeeperPath + "/" + name + "', '{replica}'"
		if args != "" {
			repl += ", " + args
		}
		engine, args = "Replicated"+engine, repl
	}
	local := "CREATE TABLE " + ifNot + rw.q(name+LocalSuffix) + rw.onCluster() + "\n" +
		rest[:e[0]] + "ENGINE = " + engine + "(" + args + rest[argsEnd:]
	dist := "CREATE TABLE " + ifNot + rw.q(name) + rw.onCluster() + " AS " + rw.q(name+LocalSuffix) + "\n" +
		"ENGINE = Distributed('" + rw.c.Name + "', '" + rw.db + "', '" + name + LocalSuffix + "', " + key + ")"
	return []string{local, dist}, nil
}

func (rw *clusterRewriter) alter(stmt string) ([]string, error) {
	m := alterRE.FindStringSubmatch(stmt)
	name := m[1]
	if _, ok := ShardingKeys[name]; !ok {
		return nil, fmt.Errorf("cluster mode: ALTER TABLE %s: not a table rdmawatch distributes (ShardingKeys)", name)
	}
	body := stmt[len(m[0]):]
	out := []string{"ALTER TABLE " + rw.q(name+LocalSuffix) + rw.onCluster() + m[2] + body}
	var mirrored []string
	for _, clause := range splitTopLevel(body) {
		if columnClause.MatchString(strings.TrimSpace(clause)) {
			mirrored = append(mirrored, stripCodec(clause))
		}
	}
	if len(mirrored) > 0 {
		// 18.16 refuses ALTER ... ON CLUSTER of a non-replicated table (the
		// Distributed one) when the shard has internal_replication, so the
		// Distributed table is recreated over the altered local table
		// instead. Dropping it drops rows it still holds to forward: run
		// such migrations with the sinks stopped (docs/deploying.md).
		out = append(out, "DROP TABLE IF EXISTS "+rw.q(name)+rw.onCluster(),
			"CREATE TABLE "+rw.q(name)+rw.onCluster()+" AS "+rw.q(name+LocalSuffix)+"\n"+
				"ENGINE = Distributed('"+rw.c.Name+"', '"+rw.db+"', '"+name+LocalSuffix+"', "+ShardingKeys[name]+")")
	}
	return out, nil
}

// tableRefs qualifies the tables and views named after FROM and JOIN with
// the database; with local, tables rdmawatch distributes become their
// _local tables (a materialized view sees the inserts into the local table).
func (rw *clusterRewriter) tableRefs(sel string, local bool) string {
	return tableRefRE.ReplaceAllStringFunc(sel, func(s string) string {
		g := tableRefRE.FindStringSubmatch(s)
		array, kw, sp, name, after := g[1], g[2], g[3], g[4], g[5]
		trail := strings.TrimLeft(after, " \t")
		if array != "" || trail == "." || trail == "(" {
			return s // ARRAY JOIN of a column, db.table, table function
		}
		if _, ok := ShardingKeys[name]; ok {
			if local {
				name += LocalSuffix
			}
		} else if !rw.views[name] {
			return s
		}
		return kw + sp + rw.q(name) + after
	})
}

// closingParen returns the index of the ')' matching the '(' at open, or -1.
func closingParen(s string, open int) int {
	depth := 0
	inStr := false
	for i := open; i < len(s); i++ {
		switch c := s[i]; {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '\'' {
				inStr = false
			}
		case c == '\'':
			inStr = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// splitTopLevel splits an ALTER's clauses on the commas outside
// parentheses, brackets and strings, keeping the text (and its line breaks) as is.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	inStr := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '\'' {
				inStr = false
			}
		case c == '\'':
			inStr = true
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// stripCodec drops CODEC(...) from a column clause: a Distributed table
// stores nothing, so only the type and default must follow the local table.
func stripCodec(clause string) string {
	for {
		loc := codecRE.FindStringIndex(clause)
		if loc == nil {
			return clause
		}
		end := closingParen(clause, loc[1]-1)
		if end < 0 {
			return clause
		}
		clause = clause[:loc[0]] + clause[end+1:]
	}
}
