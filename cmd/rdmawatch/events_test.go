package main

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"30m", now.Add(-30 * time.Minute), false},
		{"7d", now.Add(-7 * 24 * time.Hour), false},
		{"1.5d", now.Add(-36 * time.Hour), false},
		{"2026-03-14T00:00:00Z", time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), false},
		{"-5m", now.Add(-5 * time.Minute), false}, // as --from takes it: one parser
		{"2026-03-14", time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), false},
		{"0000-01-01T00:00:00+00:10", time.Time{}, true}, // year -1 in UTC, as schemas.ParseTime refuses
		{"--5m", time.Time{}, true},
		{"", time.Time{}, true},
		{"-1d", now.Add(-24 * time.Hour), false},
		{"d", time.Time{}, true},
		{"7dd", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	} {
		got, err := parseSince(tc.in, now)
		if tc.bad != (err != nil) || !tc.bad && !got.Equal(tc.want) {
			t.Errorf("parseSince(%q) = %s, %v; want %s (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"30m", "7d", "1.5d", "2026-03-14T00:00:00Z", "1e300d", "NaNd", "Infd", "-0d"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseSince(s, now)
		if err == nil && got.After(now) && s[0] != '2' && s[0] != '1' && s[0] != '0' {
			// Only an absolute time may lie after now.
			if _, perr := schemas.ParseTime(s); perr != nil {
				t.Fatalf("parseSince(%q) = %s, after now", s, got)
			}
		}
	})
}

func TestEventFilter(t *testing.T) {
	ev := &schemas.Event{Type: "pfc_storm", Severity: "critical", State: "open", Layer: "link_network", Scope: "port", Subject: schemas.Subject{Node: "gpu-1"}}
	for _, tc := range []struct {
		f    eventFilter
		want bool
	}{
		{eventFilter{}, true},
		{eventFilter{eventKinds: eventKinds{types: []string{"ber_drift", "pfc_storm"}}}, true},
		{eventFilter{eventKinds: eventKinds{types: []string{"ber_drift"}}}, false},
		{eventFilter{eventKinds: eventKinds{severities: []string{"warning"}}}, false},
		{eventFilter{nodes: []string{"gpu-1"}, eventKinds: eventKinds{states: []string{"open"}, layers: []string{"link_network"}}, scopes: []string{"port"}}, true},
		{eventFilter{nodes: []string{"gpu-2"}}, false},
	} {
		if got := tc.f.match(ev); got != tc.want {
			t.Errorf("%+v: match %v, want %v", tc.f, got, tc.want)
		}
	}
}

func TestParseTimeFlag(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"7d", now.Add(-7 * 24 * time.Hour), false},
		{"-30d", now.Add(-30 * 24 * time.Hour), false},
		{"6h", now.Add(-6 * time.Hour), false},
		{"now", now, false},
		{"2026-03-14", time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), false},
		{"", time.Time{}, false},
		{"7 days", time.Time{}, true},
		{"2026-03-14T02:00:00+02:00", time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), false},
		{"2026-03-14T00:00:00.123456789Z", time.Date(2026, 3, 14, 0, 0, 0, 123456789, time.UTC), false},
		{"0000-01-01T00:00:00+00:10", time.Time{}, true}, // year -1 in UTC: refused like every other RFC 3339 reader here
		{"1h30m", now.Add(-90 * time.Minute), false},
		{"1e3d", time.Time{}, true},
		{"NaNd", time.Time{}, true},
		{"--7d", time.Time{}, true},
		{"40000d", time.Time{}, true},
	} {
		got, err := parseTimeFlag("from", tc.in, now)
		if tc.bad != (err != nil) || !got.Equal(tc.want) {
			t.Errorf("parseTimeFlag(%q) = %s, %v; want %s (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
