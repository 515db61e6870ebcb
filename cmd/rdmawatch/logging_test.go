package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogLines: what a log line holds, in both formats.
func TestLogLines(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		log          func(*slog.Logger)
		want         []string // substrings of the line
		wantNot      []string
	}{
		{name: "json duration is Go text", format: "json",
			log:  func(l *slog.Logger) { l.Info("waiting", "retry_in", 30*time.Second) },
			want: []string{`"retry_in":"30s"`}},
		{name: "text duration", format: "text",
			log:  func(l *slog.Logger) { l.Info("waiting", "retry_in", 1500*time.Millisecond) },
			want: []string{"retry_in=1.5s"}},
		{name: "json duration in a group", format: "json",
			log:  func(l *slog.Logger) { l.WithGroup("g").Info("x", "wait", time.Minute) },
			want: []string{`"g":{"wait":"1m0s"}`}},
		{name: "child logger replaces component", format: "json",
			log:  func(l *slog.Logger) { l.With("component", "sink").With("component", "rollup").Info("rolled", "n", 1) },
			want: []string{`"component":"rollup","n":1`}, wantNot: []string{`"component":"sink"`}},
		{name: "record attribute replaces the logger's", format: "text",
			log:  func(l *slog.Logger) { l.With("component", "sink", "node", "a").Info("x", "component", "rollup") },
			want: []string{"component=rollup node=a"}, wantNot: []string{"component=sink"}},
		{name: "same key in and out of a group", format: "json",
			log:  func(l *slog.Logger) { l.With("k", 1).WithGroup("g").With("k", 2).Info("x") },
			want: []string{`"k":1,"g":{"k":2}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			l, err := newLogger(&b, tc.format, slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			tc.log(l)
			line := b.String()
			if tc.format == "json" && !json.Valid([]byte(line)) {
				t.Fatalf("not JSON: %s", line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("missing %s in %s", w, line)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(line, w) {
					t.Errorf("unexpected %q in %s", w, line)
				}
			}
		})
	}
}

// TestLastWords: the line a failed command ends with goes through the JSON
// handler with --log-format json, and stays plain without a logger.
func TestLastWords(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		logger       bool
		err          error
		want         string
		json         bool
	}{
		{name: "json", format: "json", logger: true, err: errors.New("nats nats://u:secret@h:4222 not reachable"), want: `"level":"ERROR","msg":"rdmawatch stopped","err":"nats nats://u:xxxxx@h:4222 not reachable"`, json: true},
		{name: "text", format: "text", logger: true, err: errors.New("boom"), want: "rdmawatch: boom\n"},
		{name: "before the logger", format: "json", err: errors.New(`unknown flag: --x`), want: "rdmawatch: unknown flag: --x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			g := &global{logFormat: tc.format}
			if tc.logger {
				l, err := newLogger(&b, tc.format, slog.LevelInfo)
				if err != nil {
					t.Fatal(err)
				}
				g.log = l
			}
			g.lastWords(&b, slog.LevelError, "", tc.err)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("got %q, want %q in it", b.String(), tc.want)
			}
			if tc.json && !json.Valid(b.Bytes()) {
				t.Errorf("not JSON: %s", b.String())
			}
		})
	}
}

// TestLogLinesRedacted: a secret quoted anywhere in a line (the message, an
// error, a string attribute, a logger's own attributes) is masked in both
// formats, whichever part of the code logged it.
func TestLogLinesRedacted(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, format, slog.LevelDebug)
		if err != nil {
			t.Fatal(err)
		}
		log = log.With("dsn", "clickhouse://sink:ChL0gPw@ch:9000/rdmawatch")
		log.Warn("dial nats://col:NatsL0gPw@n:4222 failed",
			"err", errors.New(`Post "https://h.example/hook?token=WhL0gTok": refused`),
			"target", "https://am:AmL0gPw@am.example:9093")
		out := buf.String()
		for _, s := range []string{"ChL0gPw", "NatsL0gPw", "WhL0gTok", "AmL0gPw"} {
			if strings.Contains(out, s) {
				t.Errorf("%s: %s is in %s", format, s, out)
			}
		}
		if !strings.Contains(out, "am.example") {
			t.Errorf("%s: the host went with the password: %s", format, out)
		}
	}
}
