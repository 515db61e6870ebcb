package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the trial's nats-server, as the
// command does when it re-executes itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveNATSCommand {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := serveNATS(ctx, os.Args[2:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTrialSmallFleet runs a whole trial on a small fleet: real
// nats-server, processor and sink processes, the ClickHouse of
// RDMAWATCH_CLICKHOUSE. Every link-flap probe must come back as an event,
// every published sample must be stored, and the report must say so.
func TestTrialSmallFleet(t *testing.T) {
	bin, dsn := os.Getenv("RDMAWATCH_BIN"), os.Getenv("RDMAWATCH_CLICKHOUSE")
	if bin == "" || dsn == "" {
		if os.Getenv("RDMAWATCH_REQUIRE_CLICKHOUSE") != "" {
			t.Fatal("RDMAWATCH_BIN and RDMAWATCH_CLICKHOUSE are required")
		}
		t.Skip("needs RDMAWATCH_BIN (the rdmawatch binary) and RDMAWATCH_CLICKHOUSE")
	}
	if testing.Short() {
		t.Skip("a 20 s trial")
	}
	f, err := parseFlags([]string{"--ports", "64", "--duration", "20s", "--flap-every", "2s", "--templates", "3",
		"--clickhouse", dsn, "--rdmawatch", bin, "--port-base", "24500", "--dir", t.TempDir(), "--report-every", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, f, log, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	report := out.String()
	t.Log("\n" + report)
	m := regexp.MustCompile(`stored: (\d+) port_samples rows \(FINAL\) of (\d+) published`).FindStringSubmatch(report)
	if m == nil || m[1] != m[2] {
		t.Errorf("rows stored and published differ or are not reported: %q", m)
	}
	if n, _ := strconv.Atoi(m[2]); n < 64*15 {
		t.Errorf("%d samples published in a 20 s trial of 64 ports", n)
	}
	p := regexp.MustCompile(`link-flap probes: (\d+) of (\d+) injected came back`).FindStringSubmatch(report)
	if p == nil || p[1] != p[2] || p[1] == "0" {
		t.Errorf("probes: %q, want every injected flap back as an event", p)
	}
	for _, want := range []string{"processor ", "sink ", "nats ", "generator ", "result: "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
