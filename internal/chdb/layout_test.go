package chdb

import (
	"strings"
	"testing"
)

func TestDistributedCluster(t *testing.T) {
	for _, tc := range []struct {
		engineFull, want string
	}{
		{"Distributed('rdmawatch', 'db', 'schema_migrations_local', version)", "rdmawatch"},
		{"Distributed(rdmawatch_2, db, schema_migrations_local, version)", "rdmawatch_2"},
		{"Distributed( 'c' , 'db', 't_local')", "c"},
		{"Distributed('a b', 'db', 't')", ""},
		{"MergeTree() ORDER BY version", ""},
		{"Distributed('', 'db', 't')", ""},
		{"", ""},
	} {
		got := ""
		if m := distributedCluster.FindStringSubmatch(tc.engineFull); m != nil {
			got = m[1]
		}
		if got != tc.want {
			t.Errorf("%q: cluster %q, want %q", tc.engineFull, got, tc.want)
		}
	}
}

func TestLayoutStatements(t *testing.T) {
	for _, tc := range []struct {
		l                        layout
		alter, parts, partsTable string
	}{
		{layout{db: "rdmawatch"}, "ALTER TABLE port_samples", "system.parts", "port_samples"},
		{layout{db: "rdmawatch", cluster: "c1", shards: 2}, "ALTER TABLE rdmawatch.port_samples_local ON CLUSTER c1", "cluster('c1', system, parts)", "port_samples_local"},
		{layout{db: "rdmawatch", cluster: "c1", shards: 1}, "ALTER TABLE rdmawatch.port_samples_local", "cluster('c1', system, parts)", "port_samples_local"},
	} {
		if got := tc.l.alter("port_samples"); got != tc.alter {
			t.Errorf("%+v alter: %q, want %q", tc.l, got, tc.alter)
		}
		if got := tc.l.partsSource(); got != tc.parts {
			t.Errorf("%+v parts: %q, want %q", tc.l, got, tc.parts)
		}
		if got := tc.l.dataTable("port_samples"); got != tc.partsTable {
			t.Errorf("%+v data table: %q, want %q", tc.l, got, tc.partsTable)
		}
	}
}

// FuzzDistributedCluster: whatever system.tables says, the name read out
// of it is one a statement can carry unquoted (identRE), or none.
func FuzzDistributedCluster(f *testing.F) {
	f.Add("Distributed('rdmawatch', 'db', 'schema_migrations_local', version)")
	f.Add("Distributed(c; DROP TABLE x, db, t)")
	f.Add("Distributed('c'")
	f.Fuzz(func(t *testing.T, s string) {
		m := distributedCluster.FindStringSubmatch(s)
		if m == nil {
			return
		}
		if !identRE.MatchString(m[1]) || strings.ContainsAny(m[1], "' ;") {
			t.Fatalf("%q: cluster %q is no identifier", s, m[1])
		}
	})
}
