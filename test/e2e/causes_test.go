package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
)

// TestLiveFleetCauseChain runs the first hour of `make run`'s live fleet
// through `rdmawatch replay` into ClickHouse: the starved receiver on
// gpu-036 is found, the PFC storm from its port names it as the cause, and
// `query causes` and `postmortem` show the chain.
func TestLiveFleetCauseChain(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	sc, ok := sim.LiveScenarioByName(sim.DefaultLiveScenario)
	if !ok {
		t.Fatal("no live fleet")
	}
	cfg := sc.Config
	cfg.Duration = 62 * time.Minute // the chain is 50..58 min in
	dir := t.TempDir()
	if _, err := sim.WriteFiles(cfg, dir, true); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "events.jsonl")
	args := []string{"replay", "--trace", filepath.Join(dir, "trace.jsonl.gz"), "--topology", filepath.Join(dir, "topology.json"),
		"--events-out", out, "--clickhouse", dsn}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	evs := readJSONL[schemas.Event](t, out)
	starved := schemas.Subject{Node: "gpu-036", Device: "mlx5_0", Port: 1}
	var starveID string
	var storm *schemas.Event
	for i, ev := range evs {
		if ev.Type == schemas.TypeReceiveStarvation && ev.Subject == starved {
			starveID = ev.ID
		}
		if ev.Type == schemas.TypePFCStorm && ev.Subject == starved && ev.Cause != nil {
			storm = &evs[i]
		}
	}
	if starveID == "" || storm == nil {
		var seen []string
		for _, ev := range evs {
			seen = append(seen, ev.Type+" "+ev.Subject.String()+" "+ev.State)
		}
		t.Fatalf("want a receive_starvation on %s and a pfc_storm from it naming it as cause; events:\n%s", starved, strings.Join(seen, "\n"))
	}
	if storm.Cause.ID != starveID || storm.Cause.Type != schemas.TypeReceiveStarvation || storm.Cause.Subject != starved {
		t.Errorf("storm cause %+v, want %s", *storm.Cause, starveID)
	}
	if !strings.Contains(storm.Summary, "does not drain its receive queue") {
		t.Errorf("storm summary %q does not say its cause", storm.Summary)
	}

	rows := queryRows(t, dsn, "causes", "--from", "2000-01-01", "--to", "2100-01-01")
	var found bool
	for _, r := range rows {
		if r["id"] == starveID {
			found = true
			ids, _ := r["effect_ids"].([]any)
			if len(ids) != 1 || ids[0] != storm.ID {
				t.Errorf("causes row %v: effects %v, want [%s]", r["id"], r["effect_ids"], storm.ID)
			}
		}
	}
	if !found {
		t.Errorf("query causes: no row for %s in %v", starveID, rows)
	}

	pm := t.TempDir()
	rdmawatch(t, dsn, "postmortem", "--from", "2000-01-01", "--to", "2100-01-01", "--out", pm)
	md, err := os.ReadFile(filepath.Join(pm, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Cause chains") || !strings.Contains(string(md), "caused by receive_starvation on gpu-036/mlx5_0/1 (incident ") {
		t.Errorf("postmortem shows no chain:\n%s", md)
	}
}
