package natsutil_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCheckStreams(t *testing.T) {
	all := []string{schemas.StreamCounters, schemas.StreamEvents, schemas.StreamInventory, schemas.StreamDeadLetter}
	tests := []struct {
		name    string
		edit    func(*jetstream.StreamConfig) // applied to the stream called stream
		stream  string
		wantErr error
		want    string // in the error
	}{
		{name: "as applied"},
		{name: "operator limits are not our business", stream: schemas.StreamEvents,
			edit: func(c *jetstream.StreamConfig) { c.MaxAge = 90 * 24 * time.Hour; c.MaxBytes = 1 << 30 }},
		{name: "other partition count is fine", stream: schemas.StreamCounters,
			edit: func(c *jetstream.StreamConfig) {
				c.SubjectTransform = schemas.CountersStream(schemas.StreamOptions{Partitions: 7}).SubjectTransform
			}},
		{name: "subjects", stream: schemas.StreamEvents, wantErr: natsutil.ErrStreamIncompatible, want: "stream RDMAWATCH_EVENTS: subjects",
			edit: func(c *jetstream.StreamConfig) { c.Subjects = []string{"rdmawatch.events.pfc_storm.>"} }},
		{name: "transform removed", stream: schemas.StreamCounters, wantErr: natsutil.ErrStreamIncompatible, want: "stream RDMAWATCH_COUNTERS: subject_transform",
			edit: func(c *jetstream.StreamConfig) { c.SubjectTransform = nil }},
		{name: "foreign transform", stream: schemas.StreamCounters, wantErr: natsutil.ErrStreamIncompatible, want: "subject_transform: destination",
			edit: func(c *jetstream.StreamConfig) {
				c.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "rdmawatch.counters.*", Destination: "rdmawatch.counters.{{wildcard(1)}}.x"}
			}},
		{name: "transform where none belongs", stream: schemas.StreamInventory, wantErr: natsutil.ErrStreamIncompatible, want: "stream RDMAWATCH_INVENTORY: subject_transform",
			edit: func(c *jetstream.StreamConfig) {
				c.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "rdmawatch.inventory.*", Destination: "rdmawatch.inventory.x.{{wildcard(1)}}"}
			}},
		{name: "missing", stream: schemas.StreamDeadLetter, wantErr: natsutil.ErrStreamMissing, want: "stream RDMAWATCH_DEADLETTER does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.stream != "" {
				st, err := srv.JS.Stream(ctx, tt.stream)
				if err != nil {
					t.Fatal(err)
				}
				if tt.edit == nil {
					if err := srv.JS.DeleteStream(ctx, tt.stream); err != nil {
						t.Fatal(err)
					}
				} else {
					cfg := st.CachedInfo().Config
					tt.edit(&cfg)
					if _, err := srv.JS.UpdateStream(ctx, cfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := natsutil.CheckStreams(ctx, srv.JS, all...)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("CheckStreams = %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

// TestApplyStreams: apply creates what is missing, keeps an operator's
// limits and the partition count unless asked, and reports each change.
func TestApplyStreams(t *testing.T) {
	srv := natstest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	apply := func(o natsutil.ApplyOptions) []string {
		t.Helper()
		changes, err := natsutil.ApplyStreams(ctx, srv.JS, o)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, c := range changes {
			s = append(s, c.String())
		}
		return s
	}
	if got := apply(natsutil.ApplyOptions{Memory: true}); len(got) != 4 || !strings.Contains(got[0], "RDMAWATCH_COUNTERS: created") || !strings.Contains(got[0], "16 partitions") {
		t.Fatalf("first apply: %q", got)
	}
	if got := apply(natsutil.ApplyOptions{}); len(got) != 0 {
		t.Fatalf("second apply changed %q", got)
	}
	// An operator's edit of the limits and an rdmawatch field.
	st, _ := srv.JS.Stream(ctx, schemas.StreamEvents)
	cfg := st.CachedInfo().Config
	cfg.MaxAge = 90 * 24 * time.Hour
	cfg.Subjects = []string{"rdmawatch.events.x.>"}
	if _, err := srv.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	got := apply(natsutil.ApplyOptions{Partitions: 7})
	want := []string{
		"RDMAWATCH_COUNTERS: subject_transform rdmawatch.counters.* -> rdmawatch.counters.{{partition(16,1)}}.{{wildcard(1)}} -> rdmawatch.counters.* -> rdmawatch.counters.{{partition(7,1)}}.{{wildcard(1)}}",
		"RDMAWATCH_EVENTS: subjects [rdmawatch.events.x.>] -> [rdmawatch.events.>]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("apply --partitions 7:\n got %q\nwant %q", got, want)
	}
	if n, err := natsutil.Partitions(ctx, srv.JS); err != nil || n != 7 {
		t.Errorf("Partitions = %d, %v; want 7", n, err)
	}
	st, _ = srv.JS.Stream(ctx, schemas.StreamEvents)
	if age := st.CachedInfo().Config.MaxAge; age != 90*24*time.Hour {
		t.Errorf("events max age %v after apply, want the operator's 2160h", age)
	}
	// Without --partitions the count stays; a limit given is set.
	got = apply(natsutil.ApplyOptions{MaxAge: map[string]time.Duration{schemas.StreamEvents: time.Hour}})
	if len(got) != 1 || got[0] != "RDMAWATCH_EVENTS: max_age 2160h0m0s -> 1h0m0s" {
		t.Errorf("apply --max-age: %q", got)
	}
	if n, _ := natsutil.Partitions(ctx, srv.JS); n != 7 {
		t.Errorf("partitions %d after apply without --partitions, want 7 kept", n)
	}
	// The duplicate window: the shipped one on a new stream, one given set,
	// then kept by an apply without it.
	st, _ = srv.JS.Stream(ctx, schemas.StreamCounters)
	if d := st.CachedInfo().Config.Duplicates; d != schemas.CountersDuplicates {
		t.Errorf("counters duplicate window %v, want the shipped %v", d, schemas.CountersDuplicates)
	}
	got = apply(natsutil.ApplyOptions{Duplicates: map[string]time.Duration{schemas.StreamCounters: 2 * time.Minute}})
	if len(got) != 1 || got[0] != "RDMAWATCH_COUNTERS: duplicate_window 10m0s -> 2m0s" {
		t.Errorf("apply --duplicates: %q", got)
	}
	if got := apply(natsutil.ApplyOptions{}); len(got) != 0 {
		t.Errorf("apply after --duplicates changed %q", got)
	}
	st, _ = srv.JS.Stream(ctx, schemas.StreamCounters)
	if d := st.CachedInfo().Config.Duplicates; d != 2*time.Minute {
		t.Errorf("counters duplicate window %v after apply, want 2m kept", d)
	}
}
