package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestStreamsApplyOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    streamsApplyFlags
		want     string // error text; empty: valid
		maxAge   map[string]time.Duration
		maxBytes map[string]int64
		dup      map[string]time.Duration
	}{
		{name: "none", maxAge: map[string]time.Duration{}, maxBytes: map[string]int64{}},
		{name: "limits", flags: streamsApplyFlags{
			maxAge:   []string{schemas.StreamEvents + "=2160h"},
			maxBytes: []string{schemas.StreamCounters + "=1073741824", schemas.StreamEvents + "=-1"}},
			maxAge:   map[string]time.Duration{schemas.StreamEvents: 2160 * time.Hour},
			maxBytes: map[string]int64{schemas.StreamCounters: 1 << 30, schemas.StreamEvents: -1}},
		{name: "unknown stream", flags: streamsApplyFlags{maxAge: []string{"EVENTS=1h"}}, want: `unknown stream "EVENTS"`},
		{name: "no equals", flags: streamsApplyFlags{maxBytes: []string{"1000"}}, want: "want STREAM=VALUE"},
		{name: "bad duration", flags: streamsApplyFlags{maxAge: []string{schemas.StreamEvents + "=30 days"}}, want: "want a duration"},
		{name: "negative duration", flags: streamsApplyFlags{maxAge: []string{schemas.StreamEvents + "=-1h"}}, want: "want a duration"},
		{name: "bad bytes", flags: streamsApplyFlags{maxBytes: []string{schemas.StreamEvents + "=1GiB"}}, want: "want a byte count"},
		{name: "bytes below -1", flags: streamsApplyFlags{maxBytes: []string{schemas.StreamEvents + "=-2"}}, want: "want a byte count"},
		{name: "duplicate window", flags: streamsApplyFlags{duplicates: []string{schemas.StreamCounters + "=10m"}},
			maxAge: map[string]time.Duration{}, maxBytes: map[string]int64{}, dup: map[string]time.Duration{schemas.StreamCounters: 10 * time.Minute}},
		{name: "zero duplicate window", flags: streamsApplyFlags{duplicates: []string{schemas.StreamCounters + "=0s"}}, want: "want a positive duration"},
		{name: "duplicate window of no stream", flags: streamsApplyFlags{duplicates: []string{"COUNTERS=1m"}}, want: `unknown stream "COUNTERS"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.flags.options()
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("options: %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("options: %v", err)
			}
			if len(o.Duplicates) != len(tc.dup) {
				t.Fatalf("options: duplicate windows %v, want %v", o.Duplicates, tc.dup)
			}
			for k, v := range tc.dup {
				if o.Duplicates[k] != v {
					t.Errorf("duplicate window of %s: %v, want %v", k, o.Duplicates[k], v)
				}
			}
			if len(o.MaxAge) != len(tc.maxAge) || len(o.MaxBytes) != len(tc.maxBytes) {
				t.Fatalf("options: max age %v, max bytes %v; want %v, %v", o.MaxAge, o.MaxBytes, tc.maxAge, tc.maxBytes)
			}
			for k, v := range tc.maxAge {
				if o.MaxAge[k] != v {
					t.Errorf("max age of %s: %v, want %v", k, o.MaxAge[k], v)
				}
			}
			for k, v := range tc.maxBytes {
				if o.MaxBytes[k] != v {
					t.Errorf("max bytes of %s: %v, want %v", k, o.MaxBytes[k], v)
				}
			}
		})
	}
}
