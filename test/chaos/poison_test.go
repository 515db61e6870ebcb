package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// The bitmap poison sets every bit of a bitmap of schemas.CounterIDs/8 + 1
// bytes: the bits from the dictionary's size to the end of the last byte
// name no counter (when the dictionary fills whole bytes, the bitmap is one
// byte longer than any the decoder accepts). Either way it must be refused,
// whatever size the dictionary (schemas/dict.go) grows to.

// poison is one hostile message and what refusing it must look like.
type poison struct {
	name    string
	stream  string // the stream the subject belongs to
	subject string
	data    []byte
	// node is the node the message names, if it decodes: nothing of it may
	// be stored.
	node string
	// reason must match the dead letter's Rdmawatch-Dead-Reason.
	reason *regexp.Regexp
}

func poisonCorpus(now time.Time) []poison {
	nowMs := now.UnixMilli()
	rng := rand.New(rand.NewPCG(8, 2026))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	farFuture := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()

	// Counter bitmap with bits past the end of the dictionary, by hand:
	// EncodeBatch cannot write it.
	nBitmap := schemas.CounterIDs/8 + 1
	var packed []byte
	packed = binary.AppendUvarint(packed, uint64(nBitmap))
	for range nBitmap {
		packed = append(packed, 0xff)
	}
	packed = append(packed, make([]byte, nBitmap)...) // every delta zero
	packed = binary.AppendUvarint(packed, 0)          // no flags
	bitmap := mpBatchHeader("poison-bitmap", nowMs, 1)
	bitmap = mpPort(bitmap, "mlx5_0", 1, nowMs, packed)

	// A batch that claims 10^6 ports and carries 10^6 bytes after the
	// claim (each an empty msgpack array): a decoder that trusts the count
	// allocates 10^6 samples before it finds the first one wrong.
	million := mpBatchHeader("poison-ports", nowMs, 1_000_000)
	million = append(million, make([]byte, 1_000_000)...)
	for i := len(million) - 1_000_000; i < len(million); i++ {
		million[i] = 0x90
	}

	version := encodeBatch(goodBatch("poison-version", nowMs))
	version[1] = schemas.Version + 1 // [0] is the array header, [1] the version (a fixint)

	invVersion, err := msgpack.Marshal(&schemas.Inventory{Version: 99, Node: "poison-inv-version", BootID: "boot", TimeMs: nowMs,
		Ports: []schemas.PortInventory{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)"}}})
	if err != nil {
		panic(err)
	}
	invSpoof, err := schemas.EncodeInventory(goodInventory("gpu-victim-i", nowMs))
	if err != nil {
		panic(err)
	}

	anything := regexp.MustCompile(`\S`)
	timeReason := regexp.MustCompile(`(?i)time|future|past|plausib|window|range`)
	nodeReason := regexp.MustCompile(`(?i)node|subject|spoof`)
	return []poison{
		{name: "bitmap_past_dictionary", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-bitmap"),
			data: bitmap, node: "poison-bitmap", reason: regexp.MustCompile(`(?i)counter|bitmap|dictionary|decode|panic|index`)},
		{name: "far_future_time", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-future"),
			data: encodeBatch(goodBatch("poison-future", farFuture)), node: "poison-future", reason: timeReason},
		{name: "negative_time", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-negative"),
			data: encodeBatch(goodBatch("poison-negative", -86_400_000)), node: "poison-negative", reason: timeReason},
		{name: "spoofed_node", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-spoof"),
			data: encodeBatch(goodBatch("gpu-victim-c", nowMs)), node: "gpu-victim-c", reason: nodeReason},
		{name: "million_ports", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-ports"),
			data: million, node: "poison-ports", reason: regexp.MustCompile(`(?i)port`)},
		{name: "random_bytes", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-random"),
			data: random(4096), node: "poison-random", reason: anything},
		{name: "wrong_version", stream: schemas.StreamCounters, subject: schemas.CountersSubject("poison-version"),
			data: version, node: "poison-version", reason: regexp.MustCompile(`(?i)version`)},
		{name: "inventory_random_bytes", stream: schemas.StreamInventory, subject: schemas.InventorySubject("poison-inv-random"),
			data: random(512), node: "poison-inv-random", reason: anything},
		{name: "inventory_wrong_version", stream: schemas.StreamInventory, subject: schemas.InventorySubject("poison-inv-version"),
			data: invVersion, node: "poison-inv-version", reason: regexp.MustCompile(`(?i)version`)},
		{name: "inventory_spoofed_node", stream: schemas.StreamInventory, subject: schemas.InventorySubject("poison-inv-spoof"),
			data: invSpoof, node: "gpu-victim-i", reason: nodeReason},
	}
}

// TestPoisonCorpus publishes each hostile message to a pipeline of real
// processes (bin/rdmawatch processor and sink on an embedded JetStream, a
// private database on the test ClickHouse), then a good message, and checks
// that the hostile one is in the dead-letter stream with its reason and
// nothing of it stored, that the good one is stored, and that no role died.
// Each message gets a pipeline of its own, so one that crashes a role does
// not hide what the others do.
func TestPoisonCorpus(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	// Cancelled by Cleanup: the parallel subtests run after this returns.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	if out, err := exec.CommandContext(ctx, bin, "migrate", "--clickhouse", dsn).CombinedOutput(); err != nil {
		t.Fatalf("rdmawatch migrate: %v\n%s", err, out)
	}
	now := time.Now().UTC()
	for i, p := range poisonCorpus(now) {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			runPoison(ctx, t, dsn, portBase()+10+i, p, now)
		})
	}
}

func runPoison(ctx context.Context, t *testing.T, dsn string, port int, p poison, now time.Time) {
	ns, err := natsembed.Start(t.TempDir(), port)
	if err != nil {
		// Another run of this test (another checkout) holds the port: any
		// free port will do.
		t.Logf("embedded nats on port %d: %v; using a free port", port, err)
		if ns, err = natsembed.Start(t.TempDir(), 0); err != nil {
			t.Fatalf("embedded nats: %v", err)
		}
	}
	t.Cleanup(ns.Shutdown)
	_, js := natstest.Connect(t, ns.URL())
	// The admin step: streams exist before any role starts.
	if args := streamsApplyArgs(ns.URL()); args != nil {
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	} else if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	proc := newRole(t, "processor", "processor", "--nats", ns.URL(), "--instance", "0", "--instances", "1")
	snk := newRole(t, "sink", "sink", "--nats", ns.URL(), "--clickhouse", dsn, "--flush-interval", "200ms")
	proc.start()
	snk.start()
	roles := []*role{proc, snk}

	msg := nats.NewMsg(p.subject)
	msg.Data = p.data
	msg.Header.Set(nats.MsgIdHdr, "poison/"+p.name)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatalf("publish the poison (%d bytes) on %s: %v", len(p.data), p.subject, err)
	}
	seq := ack.Sequence

	// A good message after the poison, on the same stream: the roles must
	// get past the poison to store it.
	goodNode := "good-after-" + strings.ReplaceAll(p.name, "_", "-")
	var goodData []byte
	var goodSubject, goodTable string
	if p.stream == schemas.StreamInventory {
		goodData, err = schemas.EncodeInventory(goodInventory(goodNode, now.UnixMilli()))
		goodSubject, goodTable = schemas.InventorySubject(goodNode), "inventory"
	} else {
		goodData, err = schemas.EncodeBatch(goodBatch(goodNode, now.UnixMilli()))
		goodSubject, goodTable = schemas.CountersSubject(goodNode), "port_samples"
	}
	if err != nil {
		t.Fatal(err)
	}
	good := nats.NewMsg(goodSubject)
	good.Data = goodData
	good.Header.Set(nats.MsgIdHdr, "good/"+p.name)
	if _, err := js.PublishMsg(ctx, good); err != nil {
		t.Fatalf("publish the good message: %v", err)
	}

	conn := chtest.Open(t, dsn)
	count := func(table, node string) (uint64, error) {
		return chtest.Count(ctx, conn, table, "node = '"+node+"'")
	}
	died := func() error {
		for _, r := range roles {
			if c := r.crashes(); len(c) > 0 {
				return fmt.Errorf("%s", strings.Join(c, "; "))
			}
		}
		return nil
	}
	// orDied ends a wait at once when a role died: what it waits for may
	// then never come.
	orDied := func(err error) error {
		if err != nil {
			if d := died(); d != nil {
				return testwait.Stop(fmt.Errorf("%v (and %v)", d, err))
			}
		}
		return err
	}
	// The good message is stored once the sink got past the poison; the
	// dead letter was due before it (both roles read in stream order), so a
	// little grace after that is enough.
	goodErr := testwait.Poll(20*time.Second, "the good message stored", func() error {
		n, err := count(goodTable, goodNode)
		if err == nil && n == 0 {
			err = fmt.Errorf("the good message published after the poison (node %s) is not in %s", goodNode, goodTable)
		}
		return orDied(err)
	})
	var letters []deadLetter
	dlErr := testwait.Poll(3*time.Second, "the dead letter", func() error {
		letters, err = deadLettersFor(ctx, js, p.stream, seq)
		if err == nil && len(letters) == 0 {
			err = fmt.Errorf("no dead letter for %s seq %d", p.stream, seq)
		}
		return orDied(err)
	})

	if died() != nil {
		// One role died: give the other a moment to show whether the same
		// message kills it too. A sleep: the other surviving it is what
		// it shows, and there is nothing to wait for.
		time.Sleep(2 * time.Second)
	}
	logs := func() string {
		var b strings.Builder
		for _, r := range roles {
			fmt.Fprintf(&b, "\n--- %s log (last lines):\n%s", r.name, r.log.tail(15))
		}
		return b.String()
	}
	failed := false
	for _, r := range roles {
		for _, c := range r.crashes() {
			t.Errorf("%s: a role died on the poison: %s", p.name, c)
			failed = true
		}
	}
	if dlErr != nil {
		t.Errorf("%s (%d bytes on %s, stream seq %d): not in the dead-letter stream %s: %v",
			p.name, len(p.data), p.subject, seq, schemas.StreamDeadLetter, dlErr)
		failed = true
	}
	for _, dl := range letters {
		if dl.reason == "" || !p.reason.MatchString(dl.reason) {
			t.Errorf("%s: dead letter from %s has reason %q, want one matching %s", p.name, dl.role, dl.reason, p.reason)
			failed = true
		}
		if string(dl.data) != string(p.data) {
			t.Errorf("%s: dead letter from %s does not keep the message: %d bytes, want the %d published", p.name, dl.role, len(dl.data), len(p.data))
			failed = true
		}
		if !sameSubject(p, dl.subject) {
			t.Errorf("%s: dead letter from %s names subject %q, want the one %s was stored under", p.name, dl.role, dl.subject, p.subject)
			failed = true
		}
	}
	if len(letters) > 0 {
		var who []string
		for _, dl := range letters {
			who = append(who, dl.role+": "+dl.reason)
		}
		sort.Strings(who)
		t.Logf("%s: dead-lettered by %s", p.name, strings.Join(who, "; "))
	}
	if goodErr != nil {
		t.Errorf("%s: the pipeline did not go on: %v", p.name, goodErr)
		failed = true
	}
	for _, table := range []string{"port_samples", "inventory"} {
		if p.node == "" {
			continue
		}
		n, err := count(table, p.node)
		if err != nil {
			t.Errorf("%s: %v", p.name, err)
			continue
		}
		if n > 0 {
			t.Errorf("%s: %d rows of the poison (node %q) stored in %s", p.name, n, p.node, table)
			failed = true
		}
	}
	for _, r := range roles {
		if !r.running() && len(r.crashes()) == 0 {
			t.Errorf("%s: %s is not running", p.name, r.name)
			failed = true
		}
	}
	if failed {
		t.Log(logs())
	}
}

// sameSubject reports whether a dead letter's subject header names where p
// was stored: the counters stream rewrites rdmawatch.counters.<node> to
// rdmawatch.counters.<partition>.<node>.
func sameSubject(p poison, got string) bool {
	if got == p.subject {
		return true
	}
	if p.stream != schemas.StreamCounters {
		return false
	}
	node := p.subject[strings.LastIndexByte(p.subject, '.'):]
	return strings.HasPrefix(got, "rdmawatch.counters.") && strings.HasSuffix(got, node) && strings.Count(got, ".") == 3
}

type deadLetter struct {
	role, reason, subject string
	data                  []byte
}

// deadLettersFor returns the dead letters of the message stored at seq in
// stream, from every role.
func deadLettersFor(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) ([]deadLetter, error) {
	s, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	for n := info.State.FirstSeq; n <= info.State.LastSeq && info.State.Msgs > 0; n++ {
		m, err := s.GetMsg(ctx, n)
		if err != nil {
			continue // deleted
		}
		h := m.Header
		if h.Get(schemas.HeaderDeadStream) != stream || h.Get(schemas.HeaderDeadStreamSeq) != strconv.FormatUint(seq, 10) {
			continue
		}
		out = append(out, deadLetter{role: h.Get(schemas.HeaderDeadRole), reason: h.Get(schemas.HeaderDeadReason),
			subject: h.Get(schemas.HeaderDeadSubject), data: m.Data})
	}
	return out, nil
}

// goodBatch is a plausible one-port batch of node at t.
func goodBatch(node string, t int64) *schemas.CounterBatch {
	return &schemas.CounterBatch{
		Node: node, BootID: "chaos", Seq: 1, TimeMs: t,
		Ports: []schemas.PortSample{{
			Device: "mlx5_0", Port: 1, Netdev: "eth0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
			TimeMs: t, IntervalMs: 10_000,
			Counters: []schemas.CounterDelta{
				{Name: "port_rcv_data", Source: schemas.SourceCounters, Delta: 4096},
				{Name: "port_xmit_data", Source: schemas.SourceCounters, Delta: 8192},
			},
		}},
	}
}

func goodInventory(node string, t int64) *schemas.Inventory {
	return &schemas.Inventory{Node: node, BootID: "chaos", TimeMs: t,
		Ports: []schemas.PortInventory{{Device: "mlx5_0", Port: 1, Netdev: "eth0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)"}}}
}

func encodeBatch(b *schemas.CounterBatch) []byte {
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		panic(err)
	}
	return data
}

// mpBatchHeader is a batch's msgpack up to its ports array header, written
// by hand (codec.go's layout): [version, node, boot_id, seq, time_ms, ports].
func mpBatchHeader(node string, timeMs int64, ports uint32) []byte {
	b := []byte{0x96, schemas.Version}
	b = mpStr(b, node)
	b = mpStr(b, "chaos")
	b = append(b, 0x01)
	b = binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(timeMs))
	if ports < 16 {
		return append(b, 0x90|byte(ports))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), ports)
}

// mpPort appends one port: [device, port, netdev, link_layer, state, rate,
// time_ms, interval_ms, counters (bin), extra, gauges].
func mpPort(b []byte, device string, port byte, timeMs int64, packed []byte) []byte {
	b = append(b, 0x9b)
	b = mpStr(b, device)
	b = append(b, port)
	for _, s := range []string{"eth0", "Ethernet", "ACTIVE", "200 Gb/sec (4X HDR)"} {
		b = mpStr(b, s)
	}
	b = binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(timeMs))
	b = binary.BigEndian.AppendUint16(append(b, 0xcd), 10_000)
	b = append(b, 0xc4, byte(len(packed)))
	b = append(b, packed...)
	return append(b, 0xc0, 0xc0)
}

func mpStr(b []byte, s string) []byte {
	if len(s) >= 32 {
		panic("mpStr: short strings only")
	}
	return append(append(b, 0xa0|byte(len(s))), s...)
}
