package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// configWatch is a fabric detector that notes, at every watermark, the MTU
// it can read for each port (0: unknown).
type configWatch struct {
	mu   sync.Mutex
	seen []configSeen
}

type configSeen struct {
	wm   schemas.Millis
	mtus map[schemas.PortID]int
}

func (w *configWatch) Name() string { return "config-watch" }
func (w *configWatch) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, _ processor.Emitter) {
	s := configSeen{wm: wm, mtus: map[schemas.PortID]int{}}
	var prev schemas.PortID
	processor.EachConfig(fabric, func(kc *processor.KnownConfig) bool {
		if prev != (schemas.PortID{}) && !portLess(prev, kc.ID) {
			panic(fmt.Sprintf("configs out of order: %v before %v", prev, kc.ID))
		}
		prev = kc.ID
		if kc.Config.MTU != nil {
			s.mtus[kc.ID] = *kc.Config.MTU
		}
		if got, ok := processor.ConfigOf(fabric, kc.ID); !ok || got.Config != kc.Config {
			panic("PortConfig disagrees with Configs")
		}
		return true
	})
	w.mu.Lock()
	w.seen = append(w.seen, s)
	w.mu.Unlock()
}

func inventoryOf(node string, atMs int64, mtu int) *schemas.Inventory {
	inv := &schemas.Inventory{Node: node, BootID: "boot", TimeMs: atMs}
	for port := 1; port <= 2; port++ {
		m := mtu
		inv.Ports = append(inv.Ports, schemas.PortInventory{Device: "mlx5_0", Port: port, LinkLayer: "Ethernet", State: "ACTIVE",
			Config: &schemas.PortConfig{MTU: &m}})
	}
	return inv
}

func publishInventory(t *testing.T, js jetstream.JetStream, subject string, inv *schemas.Inventory) {
	t.Helper()
	data, err := schemas.EncodeInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	publishRaw(t, js, subject, data)
}

// TestConfigsFollowDataTime: every instance reads every node's configs,
// whatever partitions it owns; a config read at t is seen from the
// watermark t on, not before, though its inventory came before every
// counter; refused inventories are counted and change nothing.
func TestConfigsFollowDataTime(t *testing.T) {
	js, _ := startJS(t)
	changeAt := t0 + 30_000
	publishInventory(t, js, schemas.InventorySubject("a"), inventoryOf("a", t0, 9000))
	publishInventory(t, js, schemas.InventorySubject("b"), inventoryOf("b", t0, 9000))
	publishInventory(t, js, schemas.InventorySubject("b"), inventoryOf("b", changeAt, 1500))
	publishInventory(t, js, schemas.InventorySubject("b"), inventoryOf("c", t0, 1500)) // names another node
	publishRaw(t, js, schemas.InventorySubject("c"), []byte("not msgpack"))
	const batches = 20
	for i := range batches {
		publish(t, js, batch("a", i, 0), "")
		publish(t, js, batch("b", i, 0), "")
	}
	watches := []*configWatch{{}, {}}
	var cfgs []Config
	for i, w := range watches {
		cfgs = append(cfgs, Config{Instances: 2, Instance: i, Start: StartAll, Detectors: []processor.Detector{w}})
	}
	r := start(t, js, cfgs...)
	r.waitProcessed(t, 2*batches)
	// Late news: an inventory read after the counters moved on still
	// arrives, at a later sync. A sync hands over what the read asked for
	// at the previous one held, so it takes two syncs after the publish.
	// Under heavy load (1-3 % of runs with CPU burners) nats-server's
	// pull consumer once counted the late inventory as not pending, and no
	// later read got it: the reader's stream check (streamAhead) is what
	// this test then depends on.
	publishInventory(t, js, schemas.InventorySubject("a"), inventoryOf("a", t0+100_000, 4200))
	for i := batches; i < batches+4; i++ {
		publish(t, js, batch("a", i, 0), "")
		publish(t, js, batch("b", i, 0), "")
	}
	r.waitProcessed(t, 2*(batches+4))
	r.stop()

	a1 := schemas.PortID{Node: "a", Device: "mlx5_0", Port: 1}
	b2 := schemas.PortID{Node: "b", Device: "mlx5_0", Port: 2}
	for i, w := range watches {
		if len(w.seen) == 0 {
			t.Fatalf("instance %d: no watermark", i)
		}
		for _, s := range w.seen {
			// Never a config from the future; the config read at t by
			// the watermark t plus the allowed lateness (5.5 s here) at
			// the latest: one sync step and a tick is the delay.
			const lag = 5500
			wm := int64(s.wm)
			wantA, wantB := []int{9000}, []int{9000}
			switch {
			case wm < t0:
				wantA, wantB = []int{0}, []int{0}
			case wm < t0+lag:
				wantA, wantB = []int{0, 9000}, []int{0, 9000}
			case wm >= changeAt+lag:
				wantB = []int{1500}
			case wm >= changeAt:
				wantB = []int{9000, 1500}
			}
			if wm >= t0+100_000 {
				wantA = []int{9000, 4200}
			}
			if got := s.mtus[b2]; !slices.Contains(wantB, got) {
				t.Errorf("instance %d at %v: b's MTU %d, want one of %v", i, s.wm, got, wantB)
			}
			if got := s.mtus[a1]; !slices.Contains(wantA, got) {
				t.Errorf("instance %d at %v: a's MTU %d, want one of %v", i, s.wm, got, wantA)
			}
			if _, ok := s.mtus[schemas.PortID{Node: "c", Device: "mlx5_0", Port: 1}]; ok {
				t.Errorf("instance %d: a spoofed inventory was used", i)
			}
		}
		if last := w.seen[len(w.seen)-1]; last.mtus[a1] != 4200 {
			t.Errorf("instance %d: the late inventory was never applied: %v", i, last.mtus)
		}
		st := r.procs[i].Stats()
		if st.Inventories != 4 || st.InventoriesRefused != 2 || st.ConfigPorts != 4 {
			t.Errorf("instance %d: inventories %d refused %d config ports %d, want 4, 2, 4", i, st.Inventories, st.InventoriesRefused, st.ConfigPorts)
		}
	}
}

func TestConfigBook(t *testing.T) {
	id := schemas.PortID{Node: "n", Device: "mlx5_0", Port: 1}
	mtu := func(v int) *schemas.PortConfig { return &schemas.PortConfig{MTU: &v} }
	add := func(b *configBook, at schemas.Millis, c *schemas.PortConfig) {
		inv := &schemas.Inventory{Version: schemas.Version, Node: "n", TimeMs: int64(at), Ports: []schemas.PortInventory{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", Config: c}}}
		data, err := schemas.EncodeInventory(inv)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.add(schemas.InventorySubject("n"), data); err != nil {
			t.Fatal(err)
		}
	}
	at := func(s int64) schemas.Millis { return schemas.Millis(t0 + s*1000) }

	b := newConfigBook()
	add(b, at(20), mtu(1500))
	add(b, at(10), mtu(9000)) // read out of order: queued before
	add(b, at(30), nil)       // knows nothing: never erases
	if n := b.apply(at(5)); n != 0 || len(b.known) != 0 {
		t.Fatalf("applied %d before their time", n)
	}
	if n := b.apply(at(10)); n != 1 || *b.known[id].Config.MTU != 9000 {
		t.Fatalf("at 10 s: %d changed, %+v", n, b.known[id])
	}
	b.apply(at(40))
	kc := b.known[id]
	if *kc.Config.MTU != 1500 || kc.Since != at(20) {
		t.Fatalf("at 40 s: %+v", kc)
	}
	add(b, at(50), mtu(1500)) // a refresh confirms: Since stays
	b.apply(at(60))
	add(b, at(45), mtu(9000)) // older than what is applied already
	b.apply(at(60))
	if kc := b.known[id]; *kc.Config.MTU != 1500 || kc.Since != at(20) || kc.Read != at(50) {
		t.Fatalf("after a refresh and a stale reading: %+v", kc)
	}
	if n := b.evict(at(50)); n != 0 {
		t.Fatalf("evicted a port read at the limit")
	}
	if n := b.evict(at(51)); n != 1 || len(b.order) != 0 {
		t.Fatalf("evict: %d, order %v", n, b.order)
	}
}

// TestInventoryReaderWithoutStreamInfo: a processor whose NATS user may not
// read the inventory stream's info (an auth file older than the check in
// streamAhead) still reads every inventory, and asks for the info once,
// not at every sync: a refused request is answered only by its timeout,
// which the processing goroutine would wait out each time.
func TestInventoryReaderWithoutStreamInfo(t *testing.T) {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "admin", Password: "admin"},
			{Username: "processor", Password: "processor", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.INFO." + schemas.StreamInventory}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	_, admin := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("admin", "admin"))
	_, proc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("processor", "processor"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, admin, schemas.StreamOptions{Memory: true}); err != nil {
		t.Fatal(err)
	}
	infoCtx, infoCancel := context.WithTimeout(ctx, time.Second)
	defer infoCancel()
	if _, err := proc.Stream(infoCtx, schemas.StreamInventory); err == nil {
		t.Fatal("the processor's user read the inventory stream's info: the test's permissions do not hold")
	}

	r := &inventoryReader{js: proc, name: "test", log: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() {
		if r.pending != nil { // the read the last poll asked for: its goroutine ends with the answer
			for range r.pending.Messages() {
			}
		}
	})
	var subjects []string
	collect := func(msg jetstream.Msg) { subjects = append(subjects, msg.Subject()) }
	if err := r.read(ctx, collect); err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"a", "b", "c"} {
		// Syncs that read nothing, then one inventory: each is handed
		// over by the poll after the one that asked.
		for range 3 {
			if err := r.poll(ctx, collect, false); err != nil {
				t.Fatal(err)
			}
		}
		publishInventory(t, admin, schemas.InventorySubject(node), inventoryOf(node, t0+int64(i)*1000, 9000))
		// Usually the second poll after the publish hands it over. A
		// server under load (go test runs packages side by side) may
		// answer a read from a pending count not yet updated: then a
		// later poll does, as the processor's syncs go on.
		testwait.For(t, 5*time.Second, node+"'s inventory handed over", func() error {
			if err := r.poll(ctx, collect, false); err != nil {
				return testwait.Stop(err)
			}
			switch {
			case len(subjects) > i+1:
				return testwait.Stop(fmt.Errorf("handed over %v", subjects))
			case len(subjects) < i+1:
				return fmt.Errorf("handed over %v", subjects)
			}
			return nil
		})
	}
	if r.infoAsked != 1 {
		t.Fatalf("asked for the stream's info %d times, want once (then paused for %v)", r.infoAsked, inventoryInfoPause)
	}
}

// TestBadInventoryDeadLettered: an inventory the processor refuses (not
// msgpack, or naming another node than its subject's) is copied to the
// dead-letter stream with the reason, once, though every instance and
// every restart reads the whole inventory stream again.
func TestBadInventoryDeadLettered(t *testing.T) {
	js, _ := startJS(t)
	shortDuplicates(t, js, 500*time.Millisecond)
	publishInventory(t, js, schemas.InventorySubject("a"), inventoryOf("a", t0, 9000))
	publishInventory(t, js, schemas.InventorySubject("b"), inventoryOf("c", t0, 1500)) // names another node
	publishRaw(t, js, schemas.InventorySubject("d"), []byte("not msgpack"))
	const batches = 5
	for i := range batches {
		publish(t, js, batch("a", i, 0), "")
	}
	for run := range 2 {
		// The second run starts past the dead letters' duplicate window:
		// only what it read of the stream keeps it from copying again. A
		// sleep: only wall time ends the window, and JetStream shows
		// nothing to wait on for it.
		if run > 0 {
			time.Sleep(700 * time.Millisecond)
		}
		r := start(t, js, Config{Instances: 2, Instance: 0, Start: StartAll}, Config{Instances: 2, Instance: 1, Start: StartAll})
		r.waitProcessed(t, batches)
		r.stop()
		var copied uint64
		for _, p := range r.procs {
			copied += p.Stats().InventoryDeadLetters
		}
		// Both instances of the first run copy (the copies share a
		// Nats-Msg-Id: the stream keeps one); the second run copies none.
		if run == 0 && copied == 0 || run == 1 && copied != 0 {
			t.Errorf("run %d: %d inventories dead-lettered", run, copied)
		}
	}
	c, err := js.OrderedConsumer(context.Background(), schemas.StreamDeadLetter, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.DeadLetterSubject("processor", schemas.StreamInventory)}})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for m := range msgs.Messages() {
		h := m.Headers()
		reasons[h.Get(schemas.HeaderDeadSubject)] = h.Get(schemas.HeaderDeadReason)
	}
	want := map[string]string{
		schemas.InventorySubject("b"): ReasonSpoofedNode + ": ",
		schemas.InventorySubject("d"): ReasonDecode + ": ",
	}
	if len(reasons) != len(want) {
		t.Errorf("dead letters %v, want one for each of %v", reasons, want)
	}
	for subj, prefix := range want {
		if !strings.HasPrefix(reasons[subj], prefix) {
			t.Errorf("dead letter of %s: reason %q, want %q...", subj, reasons[subj], prefix)
		}
	}
	if n := streamMsgs(t, js, schemas.StreamDeadLetter); n != 2 {
		t.Errorf("%d dead letters, want 2", n)
	}
}
