package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// flapBatch is node's batch i (5 s of data time apart, one port) whose
// link_downed rises at each batch in downs.
func flapBatch(node string, i int, downs []int) *schemas.CounterBatch {
	tm := int64(1_780_000_000_000) + int64(i)*5000
	var value, delta uint64
	for _, d := range downs {
		if d <= i {
			value++
		}
		if d == i {
			delta = 1
		}
	}
	var flags schemas.Flag
	interval := int64(5000)
	if i == 0 {
		flags, interval = schemas.FlagFirst, 0
	}
	return &schemas.CounterBatch{Node: node, BootID: "boot-1", Seq: uint64(i), TimeMs: tm,
		Ports: []schemas.PortSample{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", TimeMs: tm, IntervalMs: interval,
			Counters: []schemas.CounterDelta{{Name: "link_downed", Source: schemas.SourceCounters, Value: value, Delta: delta, Flags: flags}}}}}
}

type groupMember struct {
	e    *engine.Elastic
	nc   *nats.Conn
	stop context.CancelFunc
	done chan error
}

// TestProcessorGroupOnNATSCluster runs three elastic processors on the R3
// cluster, each connected to another node. One processor dies (its
// connection is cut, no clean leave) and the NATS node another one is
// connected to is killed -9 at the same time: the dead processor's
// partitions are taken over within 30 s, and every incident goes through
// open, update and resolved under one id with no revision stored twice.
func TestProcessorGroupOnNATSCluster(t *testing.T) {
	requireCluster(t)
	env, urls := natsCluster(t)
	list := strings.Split(urls, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	connect := func(first int, name string) (*nats.Conn, jetstream.JetStream) {
		// Each client prefers its own node, the others are failovers.
		order := append(slices.Clone(list[first:]), list[:first]...)
		nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: strings.Join(order, ","), Name: name})
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	nc, js := connect(0, "publisher")
	defer nc.Close()
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Replicas: 3}); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// The events stream as the publisher's node serves it now.
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nc, js := connect(0, "post-mortem")
		defer nc.Close()
		if c, err := js.OrderedConsumer(rctx, schemas.StreamCounters, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"rdmawatch.counters.*.gpu-000"}}); err == nil {
			var order []string
			if msgs, err := c.Fetch(1000, jetstream.FetchMaxWait(3*time.Second)); err == nil {
				for m := range msgs.Messages() {
					md, _ := m.Metadata()
					b, err := schemas.DecodeBatch(m.Data())
					if err == nil && md != nil {
						order = append(order, fmt.Sprintf("%d@%d", b.Seq, md.Sequence.Stream))
					}
				}
			}
			t.Logf("gpu-000 batches in stream order (batch@stream seq): %s", strings.Join(order, " "))
		}
		c, err := js.OrderedConsumer(rctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Logf("events stream: %v", err)
			return
		}
		msgs, err := c.Fetch(1000, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Logf("events stream: %v", err)
			return
		}
		for m := range msgs.Messages() {
			md, _ := m.Metadata()
			ev, err := schemas.DecodeEvent(m.Data())
			if err != nil || md == nil {
				t.Logf("event: %v", err)
				continue
			}
			t.Logf("event seq %d stored %s: %s rev %d %s (detected at %s)", md.Sequence.Stream, md.Timestamp.Format("15:04:05.000"), ev.ID, ev.Revision, ev.State, ev.DetectedAt)
		}
	})
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var members []*groupMember
	for i := 0; i < 3; i++ {
		mnc, mjs := connect(i, fmt.Sprintf("processor-%d", i))
		e, err := engine.NewElastic(mjs, engine.Config{
			Group: "cluster", Member: fmt.Sprintf("p%d", i), MemberTTL: 3 * time.Second,
			DetectorNames: []string{schemas.TypeLinkFlap}, StartTime: time.Now().Add(-time.Hour),
		}, log.With("member", i))
		if err != nil {
			t.Fatal(err)
		}
		mctx, stop := context.WithCancel(ctx)
		m := &groupMember{e: e, nc: mnc, stop: stop, done: make(chan error, 1)}
		go func() { m.done <- e.Run(mctx) }()
		members = append(members, m)
		t.Cleanup(func() { stop(); <-m.done; mnc.Close() })
	}
	covered := func(ms []*groupMember) error {
		own := map[int]bool{}
		for _, m := range ms {
			select {
			case err := <-m.done:
				t.Fatalf("processor %s stopped: %v", m.e.Member(), err)
			default:
			}
			for _, p := range m.e.Partitions() {
				if own[p] {
					return fmt.Errorf("partition %d owned twice", p)
				}
				own[p] = true
			}
			if len(m.e.Members()) != len(ms) {
				return fmt.Errorf("member %s sees %v", m.e.Member(), m.e.Members())
			}
		}
		if len(own) != schemas.DefaultPartitions {
			return fmt.Errorf("%d partitions owned", len(own))
		}
		return nil
	}
	testwait.For(t, 30*time.Second, "every partition owned", func() error { return covered(members) })

	const nodes = 30
	downs := map[string][]int{}
	var flapping []string
	for n := 0; n < nodes; n += 3 {
		node := fmt.Sprintf("gpu-%03d", n)
		flapping = append(flapping, node)
		downs[node] = []int{2, 20}
	}
	pub := collector.NewPublisher(js, 256, log)
	// Rounds go out back to back, many of a node's batches in flight at
	// once while the stream's leader dies under them: the publisher must
	// still store each node's batches in order (a batch stored after a
	// later one of its port is stale to every reader, its deltas with it:
	// a link down lost).
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			for n := 0; n < nodes; n++ {
				node := fmt.Sprintf("gpu-%03d", n)
				if err := pub.PublishBatch(ctx, flapBatch(node, i, downs[node])); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	events := func() uint64 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := js.Stream(rctx, schemas.StreamEvents)
		if err != nil {
			t.Logf("events stream: %v", err)
			return 0
		}
		return s.CachedInfo().State.Msgs
	}
	publish(0, 11)
	testwait.For(t, 30*time.Second, "the opens", func() error {
		if n := events(); n != uint64(len(flapping)) {
			return fmt.Errorf("%d events, want %d opens", n, len(flapping))
		}
		return nil
	})

	// Processor 0 dies; NATS node 2 (processor 1's preferred node) is
	// killed -9 at the same moment.
	killed := time.Now()
	members[0].nc.Close()
	script(t, env, "nats-cluster.sh", "kill", "2")
	survivors := members[1:]
	publish(11, 30)
	testwait.For(t, 30*time.Second, "the survivors owning every partition", func() error { return covered(survivors) })
	takeover := time.Since(killed)
	t.Logf("processor p0 and NATS node n2 killed; p0's partitions taken over after %v", takeover)
	script(t, env, "nats-cluster.sh", "start", "2")
	publish(30, 100)
	t.Logf("all batches published %v after the kill", time.Since(killed))

	want := uint64(3 * len(flapping))
	// The survivors rebuild from the stream while the cluster elects new
	// leaders after the node's return: give them two minutes.
	testwait.For(t, 120*time.Second, "every revision", func() error {
		if n := events(); n != want {
			return fmt.Errorf("%d events, want %d%s", n, want, describe(survivors))
		}
		return nil
	})
	// A late duplicate would show now. A sleep: it proves that none comes
	// in that time; there is nothing to wait for.
	time.Sleep(time.Second)
	// Read the whole stream back; a fetch right after a node's return can
	// come back short, so read until the stream's count is in hand.
	var all []jetstream.Msg
	testwait.For(t, 30*time.Second, "the whole events stream read", func() error {
		all = all[:0]
		c, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		msgs, err := c.Fetch(int(want)+100, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			return err
		}
		for m := range msgs.Messages() {
			all = append(all, m)
		}
		if uint64(len(all)) < want {
			return fmt.Errorf("read %d events back, the stream holds %d", len(all), want)
		}
		return nil
	})
	msgIDs := map[string]int{}
	states := map[string][]string{}
	ids := map[string]map[string]bool{}
	for _, m := range all {
		msgIDs[m.Headers().Get(jetstream.MsgIDHeader)]++
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		node := ev.Subject.Node
		states[node] = append(states[node], ev.State)
		if ids[node] == nil {
			ids[node] = map[string]bool{}
		}
		ids[node][ev.ID] = true
	}
	dups := 0
	for id, n := range msgIDs {
		if n > 1 || id == "" {
			dups += n - 1
			t.Errorf("Nats-Msg-Id %q stored %d times", id, n)
		}
	}
	for _, node := range flapping {
		if got := fmt.Sprint(states[node]); got != "[open update resolved]" || len(ids[node]) != 1 {
			t.Errorf("%s: states %s, ids %v", node, got, ids[node])
		}
	}
	t.Logf("%d events on the R3 events stream, %d distinct Nats-Msg-Id, %d duplicated; takeover %v", len(msgIDs)+dups, len(msgIDs), dups, takeover)
	if takeover > 30*time.Second {
		t.Errorf("takeover took %v", takeover)
	}
}

// describe says what each member is doing, for a failure's message.
func describe(ms []*groupMember) string {
	var b strings.Builder
	for _, m := range ms {
		st := m.e.Stats()
		fmt.Fprintf(&b, "\n  %s: members %v partitions %v rebalances %d processed %d samples %d (stale %d) events %d known %d duplicate %d watermark %s incidents %v open %v",
			m.e.Member(), m.e.Members(), m.e.Partitions(), m.e.Rebalances(), st.Processed, st.Samples, st.StaleSamples, st.Events, st.KnownEvents, st.DuplicateEvents, st.Watermark, st.Incidents, st.OpenIncidents)
	}
	return b.String()
}
