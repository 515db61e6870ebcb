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
	Title  string `json:"title"`
	UID    string `json:"uid"`
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
	macros := strings.NewReplacer("$__fromTime", "toDateTime('2026-03-14 00:00:00')", "$__toTime", "toDateTime('2026-03-15 00:00:00')")
	for _, s := range sqls {
		title, sql, _ := strings.Cut(s, "\x00")
		rows, err := conn.Query(ctx, macros.Replace(sql))
		if err != nil {
			t.Errorf("panel %q: %v\n%s", title, err, sql)
			continue
		}
		rows.Close()
	}
}
