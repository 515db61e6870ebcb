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
	for i := range 25 {
		ss = append(ss, second{at: time.Duration(i) * time.Second})
	}
	steady, first, last, win := windows(ss, 25*time.Second)
	if len(steady) != 20 || win != 5*time.Second || len(first) != 5 || len(last) != 5 {
		t.Fatalf("steady %d, window %s, first %d, last %d: want 20 steady seconds and windows of 5", len(steady), win, len(first), len(last))
	}
	if first[0].at != warmUp || last[len(last)-1].at != 24*time.Second {
		t.Errorf("first window starts at %s, last ends at %s", first[0].at, last[len(last)-1].at)
	}
}
