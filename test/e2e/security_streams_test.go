package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSecurityStreamsOwnedByAdmin: `streams apply` is the only step that
// changes streams. An operator's limits survive starting and stopping every
// role (real processes against a nats-server), and a role facing a missing
// or incompatible stream exits non-zero naming the stream and the field.
func TestSecurityStreamsOwnedByAdmin(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ns := startNATS(t, 14510, "jetstream { store_dir: %STORE% }\n", nil)
	env := []string{"RDMAWATCH_NATS=" + ns.URL, "RDMAWATCH_CLICKHOUSE=" + dsn}
	ctx := ctxT(t, 3*time.Minute)

	if out := mustRun(t, env, "streams", "apply"); strings.Count(out, "created") != 4 {
		t.Fatalf("streams apply on an empty server:\n%s", out)
	}
	if out := mustRun(t, env, "streams", "check"); !strings.Contains(out, "streams ok") || !strings.Contains(out, "16 partitions") {
		t.Fatalf("streams check:\n%s", out)
	}
	mustRun(t, env, "migrate")

	// The operator's limits.
	js := adminJS(t, ns.URL)
	limits := map[string]func(*jetstream.StreamConfig){
		schemas.StreamEvents:    func(c *jetstream.StreamConfig) { c.MaxAge = 90 * 24 * time.Hour },
		schemas.StreamCounters:  func(c *jetstream.StreamConfig) { c.MaxAge = 26 * time.Hour; c.MaxBytes = 1 << 30 },
		schemas.StreamInventory: func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 3 },
	}
	want := map[string]jetstream.StreamConfig{}
	for name, edit := range limits {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		edit(&cfg)
		info, err := js.UpdateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = info.CachedInfo().Config
	}

	collector := startRole(t, "collector", env, "collector", "--source", "sim", "--sim-nodes", "2", "--sim-interval", "10s", "--speed", "20")
	processor := startRole(t, "processor", env, "processor", "--instances", "1")
	sink := startRole(t, "sink", env, "sink")
	collector.waitLog("simulated collectors started", 30*time.Second)
	processor.waitLog("processor started", 30*time.Second)
	sink.waitLog("sink started", 30*time.Second)
	conn := chtest.Open(t, dsn)
	testwait.For(t, time.Minute, "rows in port_samples", func() error {
		if n, err := chtest.Count(ctx, conn, "port_samples", ""); err != nil || n == 0 {
			return errorf("port_samples: %d rows, %v", n, err)
		}
		return nil
	})
	for _, r := range []*role{collector, processor, sink} {
		r.stop()
	}
	for name, cfg := range want {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := st.CachedInfo().Config
		if got.MaxAge != cfg.MaxAge || got.MaxBytes != cfg.MaxBytes || got.MaxMsgsPerSubject != cfg.MaxMsgsPerSubject ||
			got.SubjectTransform != nil && *got.SubjectTransform != *cfg.SubjectTransform {
			t.Errorf("%s changed by starting the roles: max_age %v max_bytes %d max_msgs_per_subject %d transform %v, want %v %d %d %v",
				name, got.MaxAge, got.MaxBytes, got.MaxMsgsPerSubject, got.SubjectTransform, cfg.MaxAge, cfg.MaxBytes, cfg.MaxMsgsPerSubject, cfg.SubjectTransform)
		}
	}
	// apply keeps them too, and says there is nothing to do.
	if out := mustRun(t, env, "streams", "apply"); !strings.Contains(out, "nothing changed") {
		t.Errorf("streams apply after an operator's edit of the limits:\n%s", out)
	}

	// Incompatible streams: each role refuses, naming stream and field.
	if out := mustRun(t, env, "streams", "apply", "--partitions", "2"); !strings.Contains(out, "partition(2,1)") {
		t.Fatalf("streams apply --partitions 2:\n%s", out)
	}
	refuse := func(what string, wantMsg []string, args ...string) {
		t.Helper()
		out, code := runOnce(t, env, args...)
		if code == 0 {
			t.Errorf("%s: %s exited 0, want a refusal:\n%s", what, args[0], out)
		}
		for _, w := range wantMsg {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %s's refusal does not name %q:\n%s", what, args[0], w, out)
			}
		}
	}
	refuse("3 instances, 2 partitions", []string{"RDMAWATCH_COUNTERS", "subject_transform", "2 partitions"}, "processor", "--instances", "3")
	// A processor takes the count from the stream, whatever it is.
	p2 := startRole(t, "processor", env, "processor", "--instances", "2", "--instance", "1")
	p2.waitLog("partitions=2", 30*time.Second)
	p2.stop()

	edit := func(name string, fn func(*jetstream.StreamConfig)) {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		fn(&cfg)
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	edit(schemas.StreamCounters, func(c *jetstream.StreamConfig) {
		c.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "rdmawatch.counters.*", Destination: "rdmawatch.counters.{{partition(4,1)}}.x.{{wildcard(1)}}"}
	})
	refuse("foreign transform", []string{"RDMAWATCH_COUNTERS", "subject_transform"}, "processor")
	refuse("foreign transform", []string{"RDMAWATCH_COUNTERS", "subject_transform"}, "collector", "--node", "n1")
	edit(schemas.StreamEvents, func(c *jetstream.StreamConfig) { c.Subjects = []string{"rdmawatch.events.pfc_storm.>"} })
	refuse("events subjects", []string{"RDMAWATCH_EVENTS", "subjects"}, "sink")
	if err := js.DeleteStream(ctx, schemas.StreamInventory); err != nil {
		t.Fatal(err)
	}
	refuse("no inventory stream", []string{"RDMAWATCH_INVENTORY does not exist", "streams apply"}, "collector", "--node", "n1")
	refuse("streams check", []string{"RDMAWATCH_INVENTORY", "RDMAWATCH_EVENTS: subjects", "RDMAWATCH_COUNTERS: subject_transform"}, "streams", "check")
	// The admin step repairs all of it.
	mustRun(t, env, "streams", "apply")
	mustRun(t, env, "streams", "check")
}
