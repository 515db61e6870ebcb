// Package e2e runs the rdmawatch binary end to end: `replay` over scenario
// traces through the real embedded JetStream, processors and, when a
// ClickHouse DSN is set, the sink into the real ClickHouse.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/eval"
	"github.com/rdmawatch/rdmawatch/schemas"
)

var bin string

func TestMain(m *testing.M) {
	// make test passes the binary it built; otherwise build one.
	bin = os.Getenv("RDMAWATCH_BIN")
	if bin == "" {
		dir, err := os.MkdirTemp("", "rdmawatch-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin = filepath.Join(dir, "rdmawatch")
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/rdmawatch").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build rdmawatch: %v\n%s", err, out)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, v)
	}
	return out
}

// replay runs the binary and returns its events.
func replay(t *testing.T, scenario string, extra ...string) ([]schemas.Event, string) {
	t.Helper()
	dir := filepath.Join("..", "scenarios", scenario)
	trace := tracePath(scenario)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	args := append([]string{"replay", "--trace", trace, "--topology", filepath.Join(dir, "topology.json"), "--events-out", out}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "RDMAWATCH_CLICKHOUSE=")
	if err := cmd.Run(); err != nil {
		t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	evs := readJSONL[schemas.Event](t, out)
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			t.Errorf("event line %d: %v", i+1, err)
		}
	}
	return evs, stderr.String()
}

type incident struct {
	id     string
	typ    string
	states []string
	first  schemas.Event
	last   schemas.Event
}

func incidents(evs []schemas.Event) []*incident {
	var order []*incident
	byID := map[string]*incident{}
	for _, ev := range evs {
		in := byID[ev.ID]
		if in == nil {
			in = &incident{id: ev.ID, typ: ev.Type, first: ev}
			byID[ev.ID] = in
			order = append(order, in)
		}
		in.states = append(in.states, ev.State)
		in.last = ev
	}
	return order
}

// checkLifecycle: one incident opens once, updates, resolves at most once.
func checkLifecycle(t *testing.T, ins []*incident) {
	t.Helper()
	for _, in := range ins {
		opens, resolves := 0, 0
		for i, s := range in.states {
			switch s {
			case schemas.StateOpen:
				opens++
				if i != 0 {
					t.Errorf("%s: open after %v", in.id, in.states[:i])
				}
			case schemas.StateResolved:
				resolves++
				if i != len(in.states)-1 {
					t.Errorf("%s: events after resolved: %v", in.id, in.states)
				}
			}
		}
		if opens != 1 || resolves > 1 {
			t.Errorf("%s: states %v, want one open and at most one resolved", in.id, in.states)
		}
	}
}

func checkAgainstLabels(t *testing.T, scenario string, events []schemas.Event) *eval.Report {
	t.Helper()
	dir := filepath.Join("..", "scenarios", scenario)
	labels, err := schemas.LoadLabels(filepath.Join(dir, "labels.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	interval, err := eval.TraceInterval(tracePath(scenario))
	if err != nil {
		t.Fatal(err)
	}
	rep := eval.Evaluate(events, labels, eval.Options{Interval: interval})
	for _, m := range rep.Misses {
		t.Errorf("%s: missed %s %s from %s", scenario, m.Label.Type, m.Label.Subject, m.Label.Start)
	}
	for _, fa := range rep.FalseAlarms {
		t.Errorf("%s: false alarm (fragment=%v) %s %s: %s", scenario, fa.Fragment, fa.Incident.Type, fa.Incident.Subject, fa.Incident.Summary)
	}
	return rep
}

func tracePath(scenario string) string {
	p := filepath.Join("..", "scenarios", scenario, "trace.jsonl")
	if _, err := os.Stat(p); err != nil {
		return p + ".gz"
	}
	return p
}

func TestReplayFlapAndSaturation(t *testing.T) {
	evs, stderr := replay(t, "flap-and-saturation")
	ins := incidents(evs)
	checkLifecycle(t, ins)
	checkAgainstLabels(t, "flap-and-saturation", evs)
	if len(ins) != 2 {
		t.Errorf("%d incidents, want exactly the link flap and the saturated counter\n%s", len(ins), stderr)
	}
}

func TestReplayHealthyFleetIsQuiet(t *testing.T) {
	evs, stderr := replay(t, "healthy-noisy")
	for _, ev := range evs {
		t.Errorf("false alarm on a healthy fleet (resets, restarts, gaps, duplicates, glitches): %s %s %s", ev.Type, ev.Subject, ev.Summary)
	}
	if !strings.Contains(stderr, "duplicates dropped") {
		t.Errorf("replay printed no summary:\n%s", stderr)
	}
}

func TestReplayIsDeterministic(t *testing.T) {
	a, _ := replay(t, "example-fleet")
	b, _ := replay(t, "example-fleet")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("two replays of the same trace gave different events:\n%s\n%s", ja, jb)
	}
}

func TestReplayMalformedLineNamesIt(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "bad.jsonl")
	good := `{"kind":"sample","ts":"2026-03-14T00:00:00.012Z","node":"host-a","device":"mlx5_0","port":1,"link_layer":"Ethernet","state":"ACTIVE","rate":"200 Gb/sec (4X HDR)","counters":{"link_downed":1}}`
	good2 := strings.Replace(strings.Replace(good, "00:00:00.012", "00:00:05.012", 1), `"link_downed":1`, `"link_downed":2`, 1)
	content := good + "\n" + good2 + "\n" + `{"kind":"sample","ts":"2026-03-14T00:00:10Z","node":"host-a","device":"mlx5_0","port":"one"}` + "\n" + good + "\n"
	if err := os.WriteFile(trace, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "events.jsonl")
	cmd := exec.Command(bin, "replay", "--trace", trace, "--events-out", out)
	cmd.Env = append(os.Environ(), "RDMAWATCH_CLICKHOUSE=")
	stderrOut, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("replay of a malformed trace exited 0:\n%s", stderrOut)
	}
	if !strings.Contains(string(stderrOut), "bad.jsonl line 3") {
		t.Fatalf("error does not name line 3:\n%s", stderrOut)
	}
	// What was accepted before the bad line is kept: the flap on line 2.
	evs := readJSONL[schemas.Event](t, out)
	if len(evs) != 1 || evs[0].Type != schemas.TypeLinkFlap {
		t.Fatalf("events before the malformed line: %+v", evs)
	}
}
