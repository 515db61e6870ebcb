package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSecurityResilientStart: a collector and a sink started before NATS
// and ClickHouse exist wait for them, saying so, and work as soon as they
// appear, without a restart; a broker outage later is logged (WARN, then
// INFO with its length); SIGTERM drains and exits 0.
func TestSecurityResilientStart(t *testing.T) {
	const natsPort = 14550
	ns := startNATS(t, natsPort, "jetstream { store_dir: %STORE% }\n", nil)
	ch := newClickHouse(t, 14587, 14588)
	ch.Up()
	dsn := strings.TrimSuffix(ch.DSN, "/default") + "/rdmawatch"
	env := []string{"RDMAWATCH_NATS=" + ns.URL, "RDMAWATCH_CLICKHOUSE=" + dsn}
	// The admin steps ran once; then both services go away.
	mustRun(t, env, "streams", "apply")
	mustRun(t, env, "migrate")
	ns.Stop()
	ch.Down()

	collector := startRole(t, "collector", env, "collector", "--source", "sim", "--sim-nodes", "2", "--sim-interval", "10s", "--speed", "30")
	sink := startRole(t, "sink", env, "sink")
	collector.waitLog("nats not reachable yet", 30*time.Second)
	sink.waitLog("nats not reachable yet", 30*time.Second)

	ns.Start()
	collector.waitLog("simulated collectors started", 30*time.Second)
	sink.waitLog("clickhouse not reachable yet", 60*time.Second)
	ch.Up()
	sink.waitLog("sink started", 60*time.Second)
	conn := chtest.Open(t, dsn)
	ctx := ctxT(t, 3*time.Minute)
	rows := func() uint64 {
		n, err := chtest.Count(ctx, conn, "port_samples", "")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := testwait.Poll(time.Minute, "rows in port_samples", func() error {
		if n := rows(); n == 0 {
			return errors.New("none")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s\n%s", err, collector.out.String(), sink.out.String())
	}
	for _, r := range []*role{collector, sink} {
		for _, w := range []string{"nats reachable", "attempts="} {
			if !strings.Contains(r.out.String(), w) {
				t.Errorf("%s did not log %q:\n%s", r.name, w, r.out.String())
			}
		}
	}

	// A broker outage: visible in the logs, survived without a restart.
	ns.Stop()
	collector.waitLog("nats disconnected", 10*time.Second)
	// A sleep: the outage itself must last, for the reconnect to report
	// its length.
	time.Sleep(1500 * time.Millisecond)
	ns.Start()
	collector.waitLog("nats reconnected", 30*time.Second)
	sink.waitLog("nats reconnected", 30*time.Second)
	if !strings.Contains(collector.out.String(), "outage=") {
		t.Errorf("reconnect without the outage's length:\n%s", collector.out.String())
	}
	before := rows()
	testwait.For(t, time.Minute, "rows stored after the outage", func() error {
		if n := rows(); n <= before {
			return fmt.Errorf("port_samples stays at %d rows after the outage", n)
		}
		return nil
	})
	js := adminJS(t, ns.URL)
	if _, err := js.Stream(ctx, schemas.StreamCounters); err != nil {
		t.Fatal(err)
	}
	collector.stop()
	sink.stop()
}
