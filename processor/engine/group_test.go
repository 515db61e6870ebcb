package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestRoundRobin(t *testing.T) {
	members := []string{"a", "b", "c"}
	cases := []struct {
		member     string
		partitions int
		want       []int
	}{
		{"a", 8, []int{0, 3, 6}},
		{"b", 8, []int{1, 4, 7}},
		{"c", 8, []int{2, 5}},
		{"d", 8, nil},
		{"c", 2, nil},
	}
	for _, c := range cases {
		if got := roundRobin(members, c.member, c.partitions); !slices.Equal(got, c.want) {
			t.Errorf("roundRobin(%v, %s, %d) = %v, want %v", members, c.member, c.partitions, got, c.want)
		}
	}
}

func seq(from, to int) []int {
	var out []int
	for p := from; p < to; p++ {
		out = append(out, p)
	}
	return out
}

func TestAssignSticky(t *testing.T) {
	cases := []struct {
		name       string
		members    []string
		claims     map[string][]int
		partitions int
		want       map[string][]int
	}{
		{
			name:    "a group starting: lowest partitions to the first names, the extra one to the first",
			members: []string{"a", "b", "c"}, partitions: 16,
			want: map[string][]int{"a": seq(0, 6), "b": seq(6, 11), "c": seq(11, 16)},
		},
		{
			// The review's case: a member of five gave up everything when
			// another left, for a split with nothing in common.
			name:    "a leave moves only the orphans",
			members: []string{"m0", "m1"}, partitions: 15,
			claims: map[string][]int{"m0": {0, 3, 6, 9, 12}, "m1": {1, 4, 7, 10, 13}}, // m2 had 2 5 8 11 14
			want:   map[string][]int{"m0": {0, 2, 3, 5, 6, 8, 9, 12}, "m1": {1, 4, 7, 10, 11, 13, 14}},
		},
		{
			name:    "a join takes the surplus of the most loaded only",
			members: []string{"a", "b", "c"}, partitions: 16,
			claims: map[string][]int{"a": seq(0, 8), "b": seq(8, 16)},
			want:   map[string][]int{"a": seq(0, 6), "b": seq(8, 13), "c": {6, 7, 13, 14, 15}},
		},
		{
			name:    "a joiner sorting first takes the same amount",
			members: []string{"a", "b", "c"}, partitions: 16,
			claims: map[string][]int{"b": seq(0, 8), "c": seq(8, 16)},
			want:   map[string][]int{"a": {6, 7, 13, 14, 15}, "b": seq(0, 6), "c": seq(8, 13)},
		},
		{
			name:    "the member holding the larger share keeps the extra partition",
			members: []string{"a", "b", "c"}, partitions: 16,
			claims: map[string][]int{"a": seq(0, 5), "b": seq(5, 10), "c": seq(10, 16)},
			want:   map[string][]int{"a": seq(0, 5), "b": seq(5, 10), "c": seq(10, 16)},
		},
		{
			name:    "a partition claimed twice stays with the first name",
			members: []string{"a", "b"}, partitions: 4,
			claims: map[string][]int{"a": {0, 1}, "b": {1, 2, 3}},
			want:   map[string][]int{"a": {0, 1}, "b": {2, 3}},
		},
		{
			name:    "claims out of range are ignored",
			members: []string{"a", "b"}, partitions: 4,
			claims: map[string][]int{"a": {-1, 0, 9}, "b": {1}},
			want:   map[string][]int{"a": {0, 2}, "b": {1, 3}},
		},
		{
			name:    "more members than partitions",
			members: []string{"a", "b", "c"}, partitions: 2,
			claims: map[string][]int{"c": {0, 1}},
			want:   map[string][]int{"a": {1}, "b": nil, "c": {0}},
		},
		{name: "no members", partitions: 4, want: map[string][]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := assignSticky(c.members, c.claims, c.partitions)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("assignSticky(%v, %v) =\n%v, want\n%v", c.members, c.claims, got, c.want)
			}
			if again := assignSticky(c.members, got, c.partitions); fmt.Sprint(again) != fmt.Sprint(got) {
				t.Errorf("not a fixed point: %v gives %v", got, again)
			}
		})
	}
}

// TestAssignStickyChurn runs random joins and leaves over a settled group:
// every partition has one owner, shares differ by one at most, and of the
// members staying only those above their new share lose partitions, no
// more than their surplus: the rest that moves is the orphans of the
// members gone.
func TestAssignStickyChurn(t *testing.T) {
	const partitions = 16
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var members []string
		next := 0
		cur := map[string][]int{}
		for step := 0; step < 40; step++ {
			prev := members
			switch {
			case len(members) == 0 || (len(members) < 20 && rng.IntN(2) == 0):
				members = append(slices.Clone(members), fmt.Sprintf("m%02d", next))
				next++
				slices.Sort(members)
			default:
				i := rng.IntN(len(members))
				members = slices.Delete(slices.Clone(members), i, i+1)
			}
			got := assignSticky(members, cur, partitions)
			if len(members) == 0 {
				cur = got
				continue
			}
			owners := map[int]string{}
			lo, hi := partitions, 0
			for _, m := range members {
				for _, p := range got[m] {
					if o, dup := owners[p]; dup {
						t.Fatalf("seed %d step %d: partition %d to %s and %s", seed, step, p, o, m)
					}
					owners[p] = m
				}
				lo, hi = min(lo, len(got[m])), max(hi, len(got[m]))
			}
			if len(owners) != partitions || hi-lo > 1 {
				t.Fatalf("seed %d step %d: %v: %d owned, shares %d..%d", seed, step, got, len(owners), lo, hi)
			}
			// The fewest moves: what the members gone held, plus what
			// the members staying hold beyond their share.
			var surplus, moved int
			for _, m := range prev {
				if !slices.Contains(members, m) {
					continue // its partitions are orphans
				}
				surplus += max(0, len(cur[m])-len(got[m]))
				for _, p := range cur[m] {
					if !slices.Contains(got[m], p) {
						moved++
					}
				}
				if len(cur[m]) <= len(got[m]) && !isSubset(cur[m], got[m]) {
					t.Fatalf("seed %d step %d: %s within its share lost partitions: %v -> %v", seed, step, m, cur[m], got[m])
				}
			}
			if moved != surplus {
				t.Fatalf("seed %d step %d: %d partitions taken from members staying, their surplus is %d", seed, step, moved, surplus)
			}
			cur = got
		}
	}
}

func isSubset(a, b []int) bool {
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}

func TestNextOwned(t *testing.T) {
	claimed := func(ps ...int) func(int) bool { return func(p int) bool { return slices.Contains(ps, p) } }
	cases := []struct {
		name        string
		owned       []int
		target      []int
		others      func(int) bool
		waited      int
		want        []int
		wantWaiting bool
	}{
		{"settled", []int{1, 2}, []int{1, 2}, claimed(), 0, []int{1, 2}, false},
		{"orphans free: taken at once", []int{1, 2}, []int{1, 2, 5}, claimed(), 0, []int{1, 2, 5}, false},
		{"giving up is immediate", []int{1, 2, 3}, []int{1, 2}, claimed(), 0, []int{1, 2}, false},
		{"a joiner waits while owners still claim", nil, []int{4, 5}, claimed(5), 0, nil, true},
		{"then takes what is free", nil, []int{4, 5}, claimed(5), takeWait, []int{4}, true},
		{"never what another claims", []int{1}, []int{1, 5}, claimed(5), 10, []int{1}, true},
		{"all free: taken together", nil, []int{4, 5}, claimed(), 1, []int{4, 5}, false},
	}
	for _, c := range cases {
		got, waiting := nextOwned(c.owned, c.target, c.others, c.waited)
		if !slices.Equal(got, c.want) || waiting != c.wantWaiting {
			t.Errorf("%s: nextOwned = %v waiting %v, want %v waiting %v", c.name, got, waiting, c.want, c.wantWaiting)
		}
	}
}

func TestParseClaim(t *testing.T) {
	cases := []struct {
		value      string
		want       []int
		wantLegacy bool
		wantErr    bool
	}{
		{`{"at":"2026-03-14T00:00:00Z","partitions":[1,4]}`, []int{1, 4}, false, false},
		{`{"at":"2026-03-14T00:00:00Z","partitions":null}`, nil, false, false},
		{"2026-03-14T00:00:00.123Z", nil, true, false},
		{"", nil, true, false},
		{`{"partitions":"x"}`, nil, false, true},
	}
	for _, c := range cases {
		got, legacy, err := parseClaim([]byte(c.value))
		if !slices.Equal(got, c.want) || legacy != c.wantLegacy || (err != nil) != c.wantErr {
			t.Errorf("parseClaim(%q) = %v %v %v", c.value, got, legacy, err)
		}
	}
}

func TestNewElasticRefuses(t *testing.T) {
	srv := natstest.Start(t, nil)
	for _, cfg := range []Config{
		{},
		{Group: "a.b"},
		{Group: "g", Member: "x y"},
		{Group: "g", Instances: 2},
		{Group: "g", OwnedPartitions: []int{1}},
		{Group: "g", Start: StartAll},
		{Group: "g", MemberTTL: -time.Second},
	} {
		if _, err := NewElastic(srv.JS, cfg, nil); err == nil {
			t.Errorf("NewElastic(%+v) accepted", cfg)
		}
	}
}

// flapBatch is node's batch i (5 s of data time apart, one port) whose
// link_downed rises at each batch listed in downs.
func flapBatch(node string, i int, downs []int) *schemas.CounterBatch {
	b := &schemas.CounterBatch{Node: node, BootID: "boot", Seq: uint64(i), TimeMs: t0 + int64(i)*5000}
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
	b.Ports = []schemas.PortSample{{
		Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE",
		TimeMs: b.TimeMs, IntervalMs: interval,
		Counters: []schemas.CounterDelta{{Name: "link_downed", Source: schemas.SourceCounters, Value: value, Delta: delta, Flags: flags}},
	}}
	return b
}

type member struct {
	e      *Elastic
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// startMember runs a group member with its own connection to url until
// the test ends.
func startMember(t *testing.T, url string, cfg Config, log *slog.Logger) *member {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	mjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewElastic(mjs, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{e: e, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-m.done
		nc.Close()
	})
	return m
}

// TestElasticTakeover: three processors share the partitions; one dies
// without leaving (its connection is cut, its key expires); the other two
// take its partitions over within 30 s, and the incidents it opened continue
// (update, resolved) under the same ids with no revision stored twice.
func TestElasticTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~15 s")
	}
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	js := srv.JS
	const ttl = 3 * time.Second
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var members []*member
	for i := 0; i < 3; i++ {
		members = append(members, startMember(t, srv.URL, Config{
			Group: "test", Member: fmt.Sprintf("p%d", i), MemberTTL: ttl,
			DetectorNames: []string{schemas.TypeLinkFlap},
			StartTime:     time.Now().Add(-time.Hour),
		}, logger.With("m", i)))
	}
	owners := func(ms []*member) (map[int]int, error) {
		own := map[int]int{}
		for i, m := range ms {
			for _, p := range m.e.Partitions() {
				if j, dup := own[p]; dup {
					return nil, fmt.Errorf("partition %d owned by %d and %d", p, j, i)
				}
				own[p] = i
			}
		}
		if len(own) != schemas.DefaultPartitions {
			return nil, fmt.Errorf("%d partitions owned, want %d", len(own), schemas.DefaultPartitions)
		}
		return own, nil
	}
	testwait.For(t, 20*time.Second, "three members sharing the partitions", func() error {
		for i, m := range members {
			if len(m.e.Members()) != 3 || len(m.e.Partitions()) == 0 {
				return fmt.Errorf("member %d sees %v, owns %v", i, m.e.Members(), m.e.Partitions())
			}
		}
		_, err := owners(members)
		return err
	})

	const nodes = 30
	var flapping []string
	downsOf := map[string][]int{}
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("gpu-%03d.pod-a", n)
		if n%3 == 0 {
			flapping = append(flapping, node)
			// Opens at batch 2, updates at 20 (more than a minute
			// later), resolves 5 min of data time after that.
			downsOf[node] = []int{2, 20}
		}
	}
	publishUpTo := func(from, to int) {
		for i := from; i < to; i++ {
			for n := 0; n < nodes; n++ {
				node := fmt.Sprintf("gpu-%03d.pod-a", n)
				publish(t, js, flapBatch(node, i, downsOf[node]), "")
			}
		}
	}
	publishUpTo(0, 11)
	testwait.For(t, 20*time.Second, "the opens", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(len(flapping)) {
			return fmt.Errorf("%d events, want %d opens", n, len(flapping))
		}
		return nil
	})

	// The victim is the owner of the first flapping node's partition.
	part := nodePartitions(t, js)
	own, err := owners(members)
	if err != nil {
		t.Fatal(err)
	}
	victim := own[part[flapping[0]]]
	var victimNodes []string
	for _, node := range flapping {
		if own[part[node]] == victim {
			victimNodes = append(victimNodes, node)
		}
	}
	lost := members[victim].e.Partitions()
	t.Logf("killing member %d (partitions %v, incidents on %v)", victim, lost, victimNodes)
	killed := time.Now()
	members[victim].nc.Close() // no clean leave: its key must expire
	survivors := slices.Delete(slices.Clone(members), victim, victim+1)

	// Data keeps coming while nobody owns the victim's partitions.
	publishUpTo(11, 30)
	testwait.For(t, 30*time.Second, "the survivors owning every partition", func() error {
		_, err := owners(survivors)
		return err
	})
	takeover := time.Since(killed)
	t.Logf("partitions taken over %v after the kill", takeover)
	if takeover > 30*time.Second {
		t.Errorf("takeover took %v", takeover)
	}
	publishUpTo(30, 100)

	want := 3 * len(flapping) // open, update, resolved
	testwait.For(t, 30*time.Second, "every revision", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(want) {
			return fmt.Errorf("%d events, want %d", n, want)
		}
		return nil
	})
	// Let late duplicates, if any, arrive before counting. A sleep: it
	// proves that none comes in that time; there is nothing to wait for.
	time.Sleep(500 * time.Millisecond)
	msgIDs := map[string]int{}
	states := map[string][]string{} // node -> states in stream order
	ids := map[string]map[string]bool{}
	for _, m := range readRaw(t, js) {
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
	for id, n := range msgIDs {
		if n != 1 || id == "" {
			t.Errorf("Nats-Msg-Id %q stored %d times", id, n)
		}
	}
	for _, node := range flapping {
		if got := fmt.Sprint(states[node]); got != "[open update resolved]" {
			t.Errorf("%s: states %s", node, got)
		}
		if len(ids[node]) != 1 {
			t.Errorf("%s: incident ids %v, want one", node, ids[node])
		}
	}
	if len(states) != len(flapping) {
		t.Errorf("events for %d nodes, want %d", len(states), len(flapping))
	}
	for i, m := range survivors {
		st := m.e.Stats()
		t.Logf("survivor %d: partitions %v rebalances %d stats events %d known %d duplicates %d",
			i, m.e.Partitions(), m.e.Rebalances(), st.Events, st.KnownEvents, st.DuplicateEvents)
		if st.DuplicateEvents != 0 {
			t.Errorf("survivor %d published %d duplicates", i, st.DuplicateEvents)
		}
	}
}

// TestElasticJoinIsSticky: two members split the partitions and hold
// incidents; a third joins. Only the joiner's share moves, taken from the
// two (no member gives up a partition it keeps in its share, nobody moves
// to a split with nothing in common), the incidents open on the moved
// partitions go on under the same ids and no revision is stored twice.
func TestElasticJoinIsSticky(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~10 s")
	}
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	js := srv.JS
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	join := func(name string) *member {
		return startMember(t, srv.URL, Config{
			Group: "join", Member: name, MemberTTL: 3 * time.Second,
			DetectorNames: []string{schemas.TypeLinkFlap},
			StartTime:     time.Now().Add(-time.Hour),
		}, logger.With("m", name))
	}
	members := []*member{join("p0"), join("p1")}
	owned := func(ms []*member, want int) error {
		seen := map[int]string{}
		for _, m := range ms {
			for _, p := range m.e.Partitions() {
				if o, dup := seen[p]; dup {
					return fmt.Errorf("partition %d owned by %s and %s", p, o, m.e.Member())
				}
				seen[p] = m.e.Member()
			}
			if len(m.e.Members()) != want {
				return fmt.Errorf("member %s sees %v", m.e.Member(), m.e.Members())
			}
		}
		if len(seen) != schemas.DefaultPartitions {
			return fmt.Errorf("%d partitions owned", len(seen))
		}
		return nil
	}
	testwait.For(t, 20*time.Second, "two members sharing the partitions", func() error { return owned(members, 2) })
	before := map[string][]int{}
	for _, m := range members {
		before[m.e.Member()] = m.e.Partitions()
	}

	const nodes = 30
	downsOf := map[string][]int{}
	var flapping []string
	for n := 0; n < nodes; n += 2 {
		node := fmt.Sprintf("gpu-%03d.pod-b", n)
		flapping = append(flapping, node)
		downsOf[node] = []int{2, 20}
	}
	publishUpTo := func(from, to int) {
		for i := from; i < to; i++ {
			for n := 0; n < nodes; n++ {
				node := fmt.Sprintf("gpu-%03d.pod-b", n)
				publish(t, js, flapBatch(node, i, downsOf[node]), "")
			}
		}
	}
	publishUpTo(0, 11)
	testwait.For(t, 20*time.Second, "the opens", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(len(flapping)) {
			return fmt.Errorf("%d events, want %d opens", n, len(flapping))
		}
		return nil
	})

	members = append(members, join("p2"))
	testwait.For(t, 20*time.Second, "the joiner taking its share", func() error {
		if err := owned(members, 3); err != nil {
			return err
		}
		for _, m := range members[:2] {
			if len(m.e.Partitions()) == len(before[m.e.Member()]) {
				return fmt.Errorf("%s still owns %v", m.e.Member(), m.e.Partitions())
			}
		}
		return nil
	})
	moved := 0
	for _, m := range members[:2] {
		now := m.e.Partitions()
		if !isSubset(now, before[m.e.Member()]) {
			t.Errorf("%s: %v after the join, %v before: it took or swapped partitions", m.e.Member(), now, before[m.e.Member()])
		}
		moved += len(before[m.e.Member()]) - len(now)
	}
	if share := schemas.DefaultPartitions / 3; moved != share || len(members[2].e.Partitions()) != share {
		t.Errorf("%d partitions moved, the joiner owns %v: want its share of %d", moved, members[2].e.Partitions(), share)
	}
	t.Logf("before %v; after p0 %v p1 %v p2 %v", before, members[0].e.Partitions(), members[1].e.Partitions(), members[2].e.Partitions())

	publishUpTo(11, 100)
	want := 3 * len(flapping) // open, update, resolved
	testwait.For(t, 30*time.Second, "every revision", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(want) {
			return fmt.Errorf("%d events, want %d", n, want)
		}
		return nil
	})
	// Late duplicates, if any, arrive before counting: a sleep, as in
	// TestElasticTakeover.
	time.Sleep(500 * time.Millisecond)
	states := map[string][]string{}
	ids := map[string]map[string]bool{}
	msgIDs := map[string]int{}
	for _, m := range readRaw(t, js) {
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
	for id, n := range msgIDs {
		if n != 1 {
			t.Errorf("Nats-Msg-Id %q stored %d times", id, n)
		}
	}
	for _, node := range flapping {
		if got := fmt.Sprint(states[node]); got != "[open update resolved]" || len(ids[node]) != 1 {
			t.Errorf("%s: states %s, ids %v", node, got, ids[node])
		}
	}
}

// nodePartitions reads the counters stream: node -> partition.
func nodePartitions(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	out := map[string]int{}
	n := streamMsgs(t, js, schemas.StreamCounters)
	c, err := js.OrderedConsumer(context.Background(), schemas.StreamCounters, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		b, err := schemas.DecodeBatch(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		out[b.Node] = partitionOf(m.Subject())
	}
	return out
}

func readRaw(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	n := streamMsgs(t, js, schemas.StreamEvents)
	c, err := js.OrderedConsumer(context.Background(), schemas.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range msgs.Messages() {
		out = append(out, m)
	}
	return out
}

// TestElasticReleasesWhenCutOff: a member that can reach no NATS server
// can neither heartbeat nor list the group; the others count it out after
// the TTL, so it must let go of its partitions by then, not hold them
// because it cannot see who took them.
func TestElasticReleasesWhenCutOff(t *testing.T) {
	srv, err := natsembed.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Memory: true}); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	e, err := NewElastic(js, Config{Group: "cut", Member: "p0", MemberTTL: ttl, DetectorNames: []string{schemas.TypeLinkFlap}},
		slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testwait.For(t, 10*time.Second, "the only member owning every partition", func() error {
		if n := len(e.Partitions()); n != schemas.DefaultPartitions {
			return fmt.Errorf("owns %d partitions", n)
		}
		return nil
	})
	srv.Shutdown()
	cut := time.Now()
	// The TTL, plus a beat period and the heartbeat's own request timeout.
	testwait.For(t, ttl+ttl/4+e.requestTimeout()+time.Second, "the member to give its partitions up", func() error {
		if p := e.Partitions(); p != nil {
			return fmt.Errorf("still owns %v %v after the server went away", p, time.Since(cut).Round(time.Millisecond))
		}
		return nil
	})
	t.Logf("released %v after the server went away (TTL %v)", time.Since(cut).Round(time.Millisecond), ttl)
}

// fabricLevel is a fabric detector for the tests: a fabric incident holds
// while the latest link_downed delta of port 1 (levelBatch's) is above 0.
// Like the fabric-wide CNP check it runs only while its processor reads
// every partition.
type fabricLevel struct {
	tr    *processor.Tracker
	level uint64
}

func newFabricLevel() *fabricLevel {
	return &fabricLevel{tr: processor.NewTracker("fabric_level", processor.Policy{})}
}

func (d *fabricLevel) Name() string { return "fabric_level" }
func (d *fabricLevel) OnSample(_ context.Context, _ *processor.PortState, s *processor.Sample, _ processor.Emitter) {
	if s.ID.Port == 1 {
		d.level = s.Counters[0].Delta
	}
}
func (d *fabricLevel) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	if !fabric.Complete() {
		return
	}
	if d.level == 0 {
		d.tr.Clear(wm, schemas.Subject{}, "the level is 0", nil, em)
		return
	}
	d.tr.Hold(wm, processor.Finding{
		Scope: schemas.ScopeFabric, Onset: wm, Severity: schemas.SeverityWarning, Layer: "link_network",
		Summary: "the fabric's level is above 0",
	}, em)
}

// TestElasticGrowthEndsFabricIncident: a fabric incident opened by the
// only member of a group is ended once a second member joins, since no
// member reads every partition to evaluate it any more; the member reading
// partition 0 ends it, once.
func TestElasticGrowthEndsFabricIncident(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~10 s")
	}
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	js := srv.JS
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	join := func(name string) *member {
		return startMember(t, srv.URL, Config{
			Group: "fab", Member: name, MemberTTL: 3 * time.Second,
			NewDetectors: func() ([]processor.Detector, error) { return []processor.Detector{newFabricLevel()}, nil },
			StartTime:    time.Now().Add(-time.Hour),
		}, logger.With("m", name))
	}
	fabricEvents := func() []*schemas.Event {
		var out []*schemas.Event
		for _, ev := range readEvents(t, js) {
			if ev.Scope == schemas.ScopeFabric {
				out = append(out, ev)
			}
		}
		return out
	}
	first := join("p0")
	testwait.For(t, 20*time.Second, "the only member owning every partition", func() error {
		if n := len(first.e.Partitions()); n != schemas.DefaultPartitions {
			return fmt.Errorf("the only member owns %d partitions", n)
		}
		return nil
	})
	for i := 0; i < 10; i++ {
		publish(t, js, levelBatch(i, 1), "")
	}
	testwait.For(t, 20*time.Second, "the fabric incident open", func() error {
		if evs := fabricEvents(); len(evs) == 0 || evs[0].State != schemas.StateOpen {
			return fmt.Errorf("fabric events %v: want it open", evs)
		}
		return nil
	})
	second := join("p1")
	testwait.For(t, 30*time.Second, "the joiner taking half the partitions", func() error {
		for _, m := range []*member{first, second} {
			if n := len(m.e.Partitions()); n != schemas.DefaultPartitions/2 {
				return fmt.Errorf("member %s owns %d partitions", m.e.Member(), n)
			}
		}
		evs := fabricEvents()
		if last := evs[len(evs)-1]; last.State != schemas.StateResolved {
			return fmt.Errorf("fabric incident's last state %s", last.State)
		}
		return nil
	})
	// More data: neither member evaluates the fabric now, and the
	// incident is not ended twice.
	for i := 10; i < 20; i++ {
		publish(t, js, levelBatch(i, 1), "")
	}
	// Host-a's member re-read the first 10 batches when it took its
	// partitions over, then reads these 10.
	testwait.For(t, 20*time.Second, "the members to process the new batches", func() error {
		if n := first.e.Stats().Processed + second.e.Stats().Processed; n < 20 {
			return fmt.Errorf("the members processed %d messages since the rebalance, want 20", n)
		}
		return nil
	})
	evs := fabricEvents()
	if len(evs) != 2 || evs[1].Revision != 1 || evs[1].ID != evs[0].ID || evs[1].Evidence["resolved_by"] != "unevaluated" {
		for _, ev := range evs {
			t.Logf("%s #%d %s %v: %s", ev.ID, ev.Revision, ev.State, ev.Evidence, ev.Summary)
		}
		t.Fatalf("want the fabric incident opened once and ended once by the reader of partition 0")
	}
}
