package chdb

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		err  bool
	}{
		{"18.16.1", Version{18, 16, 1}, false},
		{"24.8.4.13", Version{24, 8, 4}, false},
		{"20.3", Version{20, 3, 0}, false},
		{"19", Version{19, 0, 0}, false},
		{"19.x", Version{}, true},
		{"", Version{}, true},
	} {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if !(Version{18, 16, 1}).AtLeast(Version{18, 16, 0}) || (Version{18, 16, 1}).AtLeast(Version{19, 0, 0}) || !(Version{24, 1, 0}).AtLeast(Version{20, 3, 0}) {
		t.Error("AtLeast orders releases wrongly")
	}
}

func TestPlanVariants(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0001_base.sql":          {Data: []byte("-- a comment\nCREATE TABLE a (x UInt8) ENGINE = Memory;\n\nCREATE TABLE b (x UInt8)\nENGINE = Memory;\n")},
		"m/0002_codecs.sql":        {Data: []byte("-- plain variant for old servers\nALTER TABLE a COMMENT COLUMN x 'plain';\n")},
		"m/0002_codecs.modern.sql": {Data: []byte("-- requires: 20.3\nALTER TABLE a MODIFY COLUMN x UInt8 CODEC(ZSTD);\n")},
		"m/0003_ttl.sql":           {Data: []byte("-- requires: 21.0\nALTER TABLE a MODIFY TTL now();\n")},
		"m/README":                 {Data: []byte("not a migration")},
	}
	for _, tc := range []struct {
		server Version
		want   []string
	}{
		{Version{18, 16, 1}, []string{"0001_base.sql", "0002_codecs.sql"}},
		{Version{20, 3, 0}, []string{"0001_base.sql", "0002_codecs.modern.sql"}},
		{Version{24, 8, 4}, []string{"0001_base.sql", "0002_codecs.modern.sql", "0003_ttl.sql"}},
	} {
		t.Run(tc.server.String(), func(t *testing.T) {
			p, err := plan(fsys, "m", tc.server)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range p {
				got = append(got, m.file)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("plan = %v, want %v", got, tc.want)
			}
			if len(p[0].stmts) != 2 || strings.Contains(p[0].stmts[0], "comment") || strings.HasSuffix(p[0].stmts[1], ";") {
				t.Fatalf("0001 statements = %q", p[0].stmts)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"bad name":         {"m/1_x.sql": {Data: []byte("SELECT 1;")}},
		"zero":             {"m/0000_x.sql": {Data: []byte("SELECT 1;")}},
		"empty":            {"m/0001_x.sql": {Data: []byte("-- nothing\n")}},
		"late header":      {"m/0001_x.sql": {Data: []byte("SELECT 1;\n-- requires: 20.1\nSELECT 2;")}},
		"bad version":      {"m/0001_x.sql": {Data: []byte("-- requires: new\nSELECT 1;")}},
		"same requirement": {"m/0001_x.sql": {Data: []byte("SELECT 1;")}, "m/0001_y.sql": {Data: []byte("SELECT 2;")}},
	} {
		if _, err := plan(fsys, "m", Version{24, 1, 0}); err == nil {
			t.Errorf("%s: plan accepted it", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestEmbeddedMigrationsParse(t *testing.T) {
	for _, v := range []Version{{18, 16, 1}, {24, 8, 0}} {
		p, err := plan(migrationFS, "migrations", v)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) < 3 {
			t.Fatalf("server %s: %d migrations, want at least 3", v, len(p))
		}
	}
}

func TestRedact(t *testing.T) {
	if got := redact("clickhouse://u:secret@h:9000/db"); strings.Contains(got, "secret") {
		t.Fatalf("redact left the password: %s", got)
	}
	if got := redact("clickhouse://127.0.0.1:19000/default"); got != "clickhouse://127.0.0.1:19000/default" {
		t.Fatalf("redact changed a DSN without password: %s", got)
	}
}
