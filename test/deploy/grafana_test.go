package deploy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
)

type grafanaDashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			AllValue   string `json:"allValue"`
			Datasource struct {
				Type string `json:"type"`
			} `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
		} `json:"datasource"`
		Targets []struct {
			Expr   string `json:"expr"`
			RawSQL string `json:"rawSql"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`rdmawatch_[a-z0-9_]+`)

// TestGrafanaDashboard: the dashboard parses; every Prometheus query reads
// metrics of the contract the roles serve; every ClickHouse query runs on a
// real, migrated server (the plugin's time macros bound to a range).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "rdmawatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("deploy/grafana/rdmawatch.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without uid, title or panels: %+v", d)
	}
	contract, err := ParseMetricsContract(filepath.Join(root(t), "deploy", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range contract {
		known[m.Name] = true
		if m.Type == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Name+s] = true
			}
		}
	}
	var sqls []string
	kinds := map[string]int{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		kinds[p.Datasource.Type]++
		for _, tg := range p.Targets {
			switch p.Datasource.Type {
			case "prometheus":
				names := metricName.FindAllString(tg.Expr, -1)
				if len(names) == 0 {
					t.Errorf("panel %q: query %q reads no rdmawatch metric", p.Title, tg.Expr)
				}
				for _, n := range names {
					if !known[n] {
						t.Errorf("panel %q: %s is not in the metrics contract (deploy/prometheus/rules.yml)", p.Title, n)
					}
				}
			case "grafana-clickhouse-datasource":
				if tg.RawSQL == "" {
					t.Errorf("panel %q: no SQL", p.Title)
				}
				sqls = append(sqls, p.Title+"\x00"+tg.RawSQL)
			default:
				t.Errorf("panel %q: data source %q", p.Title, p.Datasource.Type)
			}
		}
	}
	if kinds["prometheus"] == 0 || kinds["grafana-clickhouse-datasource"] == 0 {
		t.Errorf("panels by data source %v: want pipeline health and fleet panels", kinds)
	}

	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	// The leaf and node variables' own queries, then every panel with
	// them set to All (their custom all value) and to chosen values, as
	// Grafana's SQL formatting writes a multi-value selection.
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if v.Datasource.Type != "grafana-clickhouse-datasource" || q == "" || v.AllValue != "'*'" {
			t.Errorf("variable %s: want a ClickHouse query variable with the all value '*', got %+v", v.Name, v)
			continue
		}
		vars[v.Name] = q
	}
	for _, name := range []string{"leaf", "node"} {
		if vars[name] == "" {
			t.Errorf("no %s variable", name)
		}
	}
	for _, s := range sqls {
		title, sql, _ := strings.Cut(s, "\x00")
		if strings.Contains(sql, "events_latest") || strings.Contains(sql, "port_minute_v") || strings.Contains(sql, "port_hour_v") {
			for _, name := range []string{"${leaf}", "${node}"} {
				if !strings.Contains(sql, name) {
					t.Errorf("panel %q does not filter by %s", title, name)
				}
			}
		}
	}
	for name, q := range vars {
		sqls = append(sqls, "variable "+name+"\x00"+q)
	}
	for _, sel := range []struct{ leaf, node string }{{"'*'", "'*'"}, {"'leaf-01','leaf-02'", "'*'"}, {"'*'", "'gpu-001'"}, {"'leaf-01'", "'gpu-001','gpu-002'"}} {
		macros := grafanaMacros("toDateTime('2026-03-14 00:00:00')", "toDateTime('2026-03-15 00:00:00')", sel.leaf, sel.node)
		for _, s := range sqls {
			title, sql, _ := strings.Cut(s, "\x00")
			rows, err := conn.Query(ctx, macros.Replace(sql))
			if err != nil {
				t.Errorf("panel %q (leaf %s, node %s): %v\n%s", title, sel.leaf, sel.node, err, sql)
				continue
			}
			rows.Close()
		}
	}
}

// grafanaMacros replaces what Grafana and its ClickHouse plugin fill in:
// the time range's macros and the leaf and node variables (each a SQL
// list, as Grafana formats a multi-value selection for SQL, or the
// dashboard's custom all value '*').
func grafanaMacros(from, to, leaf, node string) *strings.Replacer {
	return strings.NewReplacer("$__fromTime", from, "$__toTime", to, "${leaf}", leaf, "${node}", node)
}
