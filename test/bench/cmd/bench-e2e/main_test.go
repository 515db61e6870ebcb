package main

import (
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"defaults", nil, true},
		{"double dash", []string{"--ports", "16", "--duration", "1m", "--clickhouse", ""}, true},
		{"zero ports", []string{"--ports", "0"}, false},
		{"negative interval", []string{"--interval", "-1s"}, false},
		{"stray argument", []string{"extra"}, false},
		{"unknown flag", []string{"--nope"}, false},
		{"more processors than partitions", []string{"--processors", "4", "--partitions", "2"}, false},
		{"no sink process", []string{"--sinks", "0"}, false},
		{"flaps faster than the interval", []string{"--flap-every", "500ms"}, false},
		{"no flaps", []string{"--flap-every", "0"}, true},
		{"port base too low", []string{"--port-base", "80"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			if (err == nil) != tc.ok {
				t.Fatalf("parseFlags(%q) = %v, want ok %v", tc.args, err, tc.ok)
			}
		})
	}
}

func TestWindowsLeaveOutTheWarmUp(t *testing.T) {
	var ss []second
	for i := range 30 {
		ss = append(ss, second{at: time.Duration(i) * time.Second})
	}
	steady, first, last, win := windows(ss, 30*time.Second)
	if len(steady) != 20 || win != 5*time.Second || len(first) != 5 || len(last) != 5 {
		t.Fatalf("steady %d, window %s, first %d, last %d: want 20 steady seconds and windows of 5", len(steady), win, len(first), len(last))
	}
	if first[0].at != warmUp || last[len(last)-1].at != 29*time.Second {
		t.Errorf("first window starts at %s, last ends at %s", first[0].at, last[len(last)-1].at)
	}
}

func TestPrivateDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, db, want string
		ok            bool
	}{
		{"clickhouse://127.0.0.1:19000/default", "bench_x", "clickhouse://127.0.0.1:19000/bench_x", true},
		{"clickhouse://u:p@127.0.0.1:19000/default?dial_timeout=5s", "b1", "clickhouse://u:p@127.0.0.1:19000/b1?dial_timeout=5s", true},
		{"clickhouse://127.0.0.1:19000", "b", "clickhouse://127.0.0.1:19000/b", true},
		{"clickhouse://127.0.0.1:19000/default", "x; DROP", "", false},
		{"not a dsn", "b", "", false},
	} {
		got, err := privateDSN(tc.dsn, tc.db)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("privateDSN(%q, %q) = %q, %v; want %q, ok %v", tc.dsn, tc.db, got, err, tc.want, tc.ok)
		}
	}
	if got, err := privateDSN("clickhouse://127.0.0.1:19000/default", ""); err != nil || got == "clickhouse://127.0.0.1:19000/default" {
		t.Errorf("default database: %q, %v; want a private one", got, err)
	}
}

// steadyWindow is a window whose figures hold: flat lag and backlogs.
func steadyWindow() window {
	w := window{pub: 1000, proc: 1000, rows: 1000, lagMean: 300 * time.Millisecond, lagMax: 600 * time.Millisecond,
		procPendMean: 10, procPendMax: 40, sinkPendMean: 300, sinkPendMax: 900, cpu: make([]float64, len(roles)), rssMax: make([]int, len(roles))}
	return w
}

func TestJudge(t *testing.T) {
	base := func() verdictInput {
		return verdictInput{first: steadyWindow(), last: steadyWindow(), all: steadyWindow(), perInterval: 125,
			interval: time.Second, drained: true, flapP99: 50 * time.Millisecond, flaps: 20, maxP99: 2 * time.Second,
			withSink: true, sinks: 1, published: 1000, rows: 1000}
	}
	for _, tc := range []struct {
		name   string
		change func(*verdictInput)
		holds  bool
		reason string
	}{
		{"flat", func(*verdictInput) {}, true, ""},
		{"generator behind", func(in *verdictInput) { in.all.behindMax = 1500 * time.Millisecond }, false, "load generator"},
		{"processor lag grows", func(in *verdictInput) { in.last.lagMean = 1700 * time.Millisecond }, false, "processor"},
		{"processor lag swings", func(in *verdictInput) { in.last.lagMean = 1500 * time.Millisecond }, true, ""},
		{"processor backlog grows", func(in *verdictInput) { in.last.procPendMean = 200 }, false, "processor"},
		{"sink backlog grows", func(in *verdictInput) { in.last.sinkPendMean = 1100 }, false, "sink"},
		{"sink backlog swings", func(in *verdictInput) { in.last.sinkPendMean = 1000 }, true, ""},
		{"sink backlog grows, no sink", func(in *verdictInput) { in.last.sinkPendMean, in.withSink = 2000, false }, true, ""},
		{"not drained", func(in *verdictInput) { in.drained = false }, false, "drain"},
		{"rows missing", func(in *verdictInput) { in.rows = 999 }, false, "storage"},
		{"slow events", func(in *verdictInput) { in.flapP99 = 3 * time.Second }, false, "latency"},
		{"no probe back", func(in *verdictInput) { in.flaps = 0 }, false, "latency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.change(&in)
			v := judge(in)
			if v.holds != tc.holds {
				t.Fatalf("holds %v, want %v (reasons %q)", v.holds, tc.holds, v.reasons)
			}
			if tc.reason != "" && (len(v.reasons) == 0 || !hasPrefix(v.reasons[0], tc.reason)) {
				t.Errorf("reasons %q, want the first to name %q", v.reasons, tc.reason)
			}
		})
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
