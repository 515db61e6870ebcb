package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Elastic processors: instead of the static --instance i --instances k
// split, the processors of a group share the counters stream's partitions
// among the members alive now. Each member heartbeats a key in a KV bucket
// whose entries expire after MemberTTL; the value names the partitions the
// member runs now (its claim). Every member lists the live keys of its
// group with their claims and computes the same assignment from them
// (assignSticky): a member keeps what it claims, the partitions of a member
// gone (orphans) go to the members below their share, and a member above
// its share gives up only its surplus, so a join or a leave moves as few
// partitions as balance needs, like Kafka's cooperative sticky assignor.
//
// Moves are cooperative: a member gives up a partition as soon as its
// computed share lacks it, and takes one only once no live member claims
// it any more, so no partition is read by two members while the group is
// still agreeing. A member whose set of partitions changed restarts its
// processor on the new set with a warm-up: its windows are rebuilt from
// the stream and the events stream says which incident revisions are out
// already, so the incidents of a dead member continue under the same ids
// and none is published twice (published.go). A member whose set did not
// change is not disturbed.
//
// Takeover: a member that dies without leaving keeps its partitions until
// its key expires, MemberTTL after its last heartbeat. The others know when
// that is due (the server's store time of the heartbeat plus the TTL) and
// list the group again right after it (expiryWake). Dying somewhere in its
// own beat period (MemberTTL/8), its partitions are without an owner for
// MemberTTL less up to a beat period, plus the server's expiry and
// expiryMargin: 9.2-10.3 s with the default 10 s over 12 runs of
// TestElasticTakeoverTime. A member that leaves cleanly deletes its key and
// is taken over at the others' next beat.
//
// Why not github.com/synadia-io/orbit.go/pcgroups (v0.2.2, evaluated):
// its membership is administrative (members are added to and dropped from
// a KV config by an operator; a dead member keeps its partitions, only a
// hot standby under the same member name takes over); its consumers are
// acked durable consumers that resume at the ack floor, where a takeover
// here must re-read the warm-up window; and its elastic flavour copies the
// stream into a work-queue stream. What is needed here is liveness-driven
// assignment plus a warm-up restart, which is this file.

// MembersBucket is the KV bucket holding the live members of every
// processor group, one key <group>.<member> each.
const MembersBucket = "rdmawatch_processors"

// DefaultMemberTTL is how long a member that stopped heartbeating still
// owns its partitions.
const DefaultMemberTTL = 10 * time.Second

var groupName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Elastic runs a processor over the partitions its group assigns it, and
// moves to a new assignment whenever the group's membership changes.
type Elastic struct {
	js    jetstream.JetStream
	cfg   Config
	log   *slog.Logger
	group string
	name  string
	ttl   time.Duration

	mu         sync.Mutex
	cur        *Processor
	members    []string
	rebalances uint64
}

// NewElastic checks cfg (Group is required; Instance, Instances,
// OwnedPartitions and Detectors must be unset, StartWarmUp) and returns the
// group member; Run does the work.
func NewElastic(js jetstream.JetStream, cfg Config, log *slog.Logger) (*Elastic, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidConfig)
	}
	switch {
	case !groupName.MatchString(cfg.Group):
		return nil, fmt.Errorf("%w: processor group %q: want letters, digits, _ or -", ErrInvalidConfig, cfg.Group)
	case cfg.Member != "" && !groupName.MatchString(cfg.Member):
		return nil, fmt.Errorf("%w: group member %q: want letters, digits, _ or -", ErrInvalidConfig, cfg.Member)
	case cfg.Instances > 1 || len(cfg.OwnedPartitions) > 0:
		return nil, fmt.Errorf("%w: a processor group assigns partitions itself: no instances nor owned partitions", ErrInvalidConfig)
	case cfg.Detectors != nil:
		// Every rebalance builds fresh detectors: state is rebuilt.
		return nil, fmt.Errorf("%w: a processor group builds fresh detectors at every rebalance: DetectorNames or NewDetectors, not Detectors", ErrInvalidConfig)
	case cfg.Start != StartWarmUp:
		return nil, fmt.Errorf("%w: a processor group starts with a warm-up", ErrInvalidConfig)
	case cfg.MemberTTL < 0:
		return nil, fmt.Errorf("%w: negative member TTL", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := cfg.Member
	if name == "" {
		name = defaultMemberName()
	}
	ttl := cfg.MemberTTL
	if ttl == 0 {
		ttl = DefaultMemberTTL
	}
	return &Elastic{js: js, cfg: cfg, group: cfg.Group, name: name, ttl: ttl,
		log: log.With("group", cfg.Group, "member", name)}, nil
}

// defaultMemberName is unique per process: host, pid and a random tail, so
// that a restarted process is a new member (its old key expires).
func defaultMemberName() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Member is this member's name in the group.
func (e *Elastic) Member() string { return e.name }

// Members is the group's membership as last seen, sorted.
func (e *Elastic) Members() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.members)
}

// Partitions are the partitions owned now (nil while it owns none).
func (e *Elastic) Partitions() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return nil
	}
	return e.cur.Partitions()
}

// Rebalances counts the assignments this member has started processors
// for.
func (e *Elastic) Rebalances() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rebalances
}

// Stats are the current processor's (zero while it owns none); counters
// restart with every rebalance.
func (e *Elastic) Stats() Stats {
	e.mu.Lock()
	cur := e.cur
	e.mu.Unlock()
	if cur == nil {
		return Stats{}
	}
	return cur.Stats()
}

// roundRobin is the split of the members that do not publish their
// claim (a heartbeat holding only a time, written before claims were):
// partition p goes to the member at p mod len(members) of the sorted names.
// Such a member runs exactly that, so it is what the others take as its
// claim during a rolling upgrade.
func roundRobin(members []string, member string, partitions int) []int {
	i := slices.Index(members, member)
	if i < 0 {
		return nil
	}
	var out []int
	for p := i; p < partitions; p += len(members) {
		out = append(out, p)
	}
	return out
}

// assignSticky is the group's assignment: members (sorted, unique) with
// what each claims to run now, to what each is to run. Every member
// computes it alike from the same listing, without a coordinator:
//
//   - a partition claimed by several members stays with the first of them
//     by name, the others give it up (two members took it from listings
//     made at different moments);
//   - shares are balanced: partitions/len(members) each, one more for the
//     first partitions%len(members) members by the number of partitions
//     they hold (most first, then by name), so that a member already
//     holding the larger share keeps it;
//   - a member above its share gives up its highest partitions; the
//     partitions nobody holds then (orphans of a member gone, surpluses)
//     go, lowest first, to the members below their share, in name order.
//
// A member therefore keeps every partition it claims as long as it is not
// above its share: a leave moves only the orphans, a join only what the
// joiner's share takes from the members holding the most. An assignment
// it produced is its own result (a fixed point), so a settled group stays
// settled.
func assignSticky(members []string, claims map[string][]int, partitions int) map[string][]int {
	out := make(map[string][]int, len(members))
	if len(members) == 0 || partitions <= 0 {
		return out
	}
	owner := make([]int, partitions)
	for p := range owner {
		owner[p] = -1
	}
	held := make([][]int, len(members))
	for i, m := range members {
		for _, p := range claims[m] {
			if p >= 0 && p < partitions && owner[p] < 0 {
				owner[p] = i
			}
		}
	}
	for p, i := range owner {
		if i >= 0 {
			held[i] = append(held[i], p) // ascending
		}
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(held[order[a]]) > len(held[order[b]]) })
	quota := make([]int, len(members))
	base, extra := partitions/len(members), partitions%len(members)
	for k, i := range order {
		quota[i] = base
		if k < extra {
			quota[i]++
		}
	}
	var free []int
	for i := range held {
		if n := len(held[i]); n > quota[i] {
			for _, p := range held[i][quota[i]:] {
				owner[p] = -1
			}
			held[i] = held[i][:quota[i]]
		}
	}
	for p, i := range owner {
		if i < 0 {
			free = append(free, p)
		}
	}
	for i := range held {
		for len(held[i]) < quota[i] && len(free) > 0 {
			held[i] = append(held[i], free[0])
			free = free[1:]
		}
		slices.Sort(held[i])
		out[members[i]] = held[i]
	}
	return out
}

// memberClaim is a heartbeat's value: when it was written and the
// partitions the member runs.
type memberClaim struct {
	At         time.Time `json:"at"`
	Partitions []int     `json:"partitions"`
}

// parseClaim reads a heartbeat's value; legacy is true for a value
// without a claim (a bare time: a member of an earlier release).
func parseClaim(v []byte) (partitions []int, legacy bool, err error) {
	if len(v) == 0 || v[0] != '{' {
		return nil, true, nil
	}
	var c memberClaim
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, false, err
	}
	return c.Partitions, false, nil
}

// takeWait is how many beats a member waits for every partition of its
// new share to be given up before it takes those already free: one beat
// lets every current owner see the new share and let go, so the member
// restarts its processor once instead of once per owner.
const takeWait = 2

// nextOwned is what a member runs next: what it owns and its share (target)
// both hold, plus the partitions of the share that no other live member
// claims. While others still claim part of the share (waiting), it takes
// the free part only once takeWait beats have passed.
func nextOwned(owned, target []int, claimedByOthers func(int) bool, waited int) (next []int, waiting bool) {
	var free, busy int
	for _, p := range target {
		switch {
		case slices.Contains(owned, p):
			next = append(next, p)
		case claimedByOthers(p):
			busy++
		default:
			free++
		}
	}
	if free > 0 && (busy == 0 || waited >= takeWait) {
		for _, p := range target {
			if !slices.Contains(owned, p) && !claimedByOthers(p) {
				next = append(next, p)
			}
		}
		slices.Sort(next)
	}
	return next, busy > 0
}

// Run heartbeats, follows the membership and runs the processor until ctx
// ends (then it leaves the group cleanly and returns nil) or the processor
// fails for good (an invalid configuration, the connection closed).
//
// Nothing in the loop may wait without a deadline: a member that stops
// heartbeating is counted out by the others, and if it still holds its
// partitions they are processed twice. So every request has a timeout, and
// a processor being replaced is not waited for beyond a moment (see
// memberLoop.stop); it is waited for when Run returns.
func (e *Elastic) Run(ctx context.Context) error {
	kv, err := e.bucket(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	m := &memberLoop{e: e, kv: kv, key: e.group + "." + e.name, firstPass: true}
	defer m.leave(ctx)
	tick := time.NewTicker(e.beatPeriod())
	defer tick.Stop()
	for {
		var members []listedMember
		err := m.beat(ctx)
		lapsed := time.Since(m.lastBeat) > e.ttl
		if err == nil || !lapsed {
			// Not when the beat failed past the TTL: a listing would
			// only delay letting go.
			rctx, cancel := context.WithTimeout(ctx, e.requestTimeout())
			members, err = e.listMembers(rctx, kv)
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("processor group %s: %w", e.group, err)
		case lapsed:
			// The others count us out by now (whether or not we can
			// list them): let go of the partitions rather than process
			// them twice.
			if m.run != nil {
				e.log.Warn("heartbeats failing for longer than the member TTL; releasing partitions", "ttl", e.ttl)
				m.stop()
			}
		case err != nil:
			e.log.Warn("processor group membership", "err", err)
		case m.firstPass:
			// A member joining waits one beat before taking partitions, so
			// that the members started with it see one another's claims
			// first rather than all take the partitions free at start.
			m.firstPass = false
		default:
			if err := m.follow(ctx, members); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-m.expiryWake():
			m.wakeFired++
		case err := <-m.done():
			if err := m.stopped(ctx, err); err != nil {
				return err
			}
		}
	}
}

// expiryMargin is how long after a key's expiry (its last heartbeat's
// store time plus the TTL) the member lists the group again: the server
// removes expired messages on a timer of its own, 250 ms at the least
// (measured: 0.26 s after the TTL on an embedded server).
const expiryMargin = 300 * time.Millisecond

// expiryRetries bounds the listings aimed at one expiry; the regular beat
// takes over after them (a server clock far from the member's).
const expiryRetries = 4

// expiryWake fires when the next member's key is due to expire (nil:
// never), so that the listing comes right after it: without it a member
// gone was seen at the first listing after its expiry, which with beats in
// phase (members started together beat together, and the TTL is a whole
// number of beat periods) came a whole beat period after it, and the
// takeover took the TTL plus a period. A listing aimed at an expiry that
// finds the key still there tries again shortly, expiryRetries times.
func (m *memberLoop) expiryWake() <-chan time.Time {
	if m.wakeAt.IsZero() || m.wakeFired >= expiryRetries {
		return nil
	}
	d := time.Until(m.wakeAt)
	if m.wakeFired > 0 {
		d = 250 * time.Millisecond
	}
	return time.After(max(d, 0))
}

// beatPeriod is how often a member heartbeats and lists the group: an
// eighth of the TTL, so that a member gone is seen at most that long after
// its key expired, and a heartbeat lost in a leader election leaves seven
// more before the TTL.
func (e *Elastic) beatPeriod() time.Duration { return e.ttl / 8 }

// requestTimeout bounds each request of the group's loop: well inside the
// TTL, so that one lost reply costs one beat, not the membership.
func (e *Elastic) requestTimeout() time.Duration { return max(e.ttl/2, 2*time.Second) }

// memberLoop is the state of one Run: the heartbeat and the processor on the
// partitions owned now.
type memberLoop struct {
	e         *Elastic
	kv        jetstream.KeyValue
	key       string
	lastBeat  time.Time
	firstPass bool
	run       *runningProc
	owned     []int
	// target is the share last computed, waited the beats spent waiting
	// for others to give up part of it (see nextOwned).
	target []int
	waited int
	// wakeAt is when the first other member's key expires unless it
	// heartbeats again, plus expiryMargin; wakeFired counts the listings
	// aimed at it (expiryTimer).
	wakeAt    time.Time
	wakeFired int
	// procs counts the processors started and not yet returned, the
	// replaced ones included.
	procs sync.WaitGroup
}

// beat puts the member's key with its claim (the partitions it runs now);
// it returns the error after logging it.
func (m *memberLoop) beat(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, m.e.requestTimeout())
	defer cancel()
	v, err := json.Marshal(memberClaim{At: time.Now().UTC(), Partitions: m.owned})
	if err == nil {
		_, err = m.kv.Put(rctx, m.key, v)
	}
	switch {
	case err == nil:
		m.lastBeat = time.Now()
	case ctx.Err() == nil:
		m.e.log.Warn("processor group heartbeat", "err", err)
	}
	return err
}

// follow computes this member's share from the listing and moves towards
// it: it gives up at once what the share lacks, and takes what no other
// member claims any more (nextOwned). After a change it heartbeats at once,
// so that the others see the partitions it gave up, or took, without
// waiting for its next beat.
func (m *memberLoop) follow(ctx context.Context, listed []listedMember) error {
	e := m.e
	names := make([]string, 0, len(listed)+1)
	claims := make(map[string][]int, len(listed)+1)
	claimedBy := make([]string, e.cfg.Partitions)
	var legacy []string
	var wakeAt time.Time
	for _, l := range listed {
		names = append(names, l.name)
		if l.legacy {
			legacy = append(legacy, l.name)
		}
		if exp := l.beat.Add(e.ttl + expiryMargin); l.name != e.name && !l.beat.IsZero() && (wakeAt.IsZero() || exp.Before(wakeAt)) {
			wakeAt = exp
		}
	}
	if !wakeAt.Equal(m.wakeAt) {
		m.wakeAt, m.wakeFired = wakeAt, 0
	}
	for _, l := range listed {
		c := l.claim
		if l.legacy {
			c = roundRobin(names, l.name, e.cfg.Partitions)
		}
		if l.name == e.name {
			continue
		}
		claims[l.name] = c
		for _, p := range c {
			if p >= 0 && p < len(claimedBy) && claimedBy[p] == "" {
				claimedBy[p] = l.name
			}
		}
	}
	// Our claim is what we run, whatever the listing read back. Our own
	// key missing from the listing leaves us no share: the others do not
	// count us either, and take our partitions.
	claims[e.name] = m.owned
	e.mu.Lock()
	e.members = names
	e.mu.Unlock()
	target := assignSticky(names, claims, e.cfg.Partitions)[e.name]
	if !slices.Equal(target, m.target) {
		m.target, m.waited = target, 0
	}
	next, waiting := nextOwned(m.owned, target, func(p int) bool { return claimedBy[p] != "" }, m.waited)
	if waiting {
		m.waited++
	} else {
		m.waited = 0
	}
	if len(legacy) > 0 && !slices.Equal(next, m.owned) {
		e.log.Info("processor group: members without claims (an earlier release) are taken to run the round-robin split", "members", legacy)
	}
	if slices.Equal(next, m.owned) {
		return nil
	}
	kept, gave, took := diffPartitions(m.owned, next)
	e.log.Info("processor group: partitions moving", "kept", kept, "given_up", gave, "taken", took,
		"share", target, "waiting_for", len(target)-len(next), "members", names)
	m.stop()
	if len(next) == 0 {
		_ = m.beat(ctx)
		e.log.Info("processor group: no partition for this member", "members", names)
		return nil
	}
	run, err := e.start(ctx, next, names, &m.procs)
	if err != nil {
		return err
	}
	m.run, m.owned = run, next
	_ = m.beat(ctx)
	return nil
}

// diffPartitions splits a move from owned to next into what stays, what
// goes and what comes.
func diffPartitions(owned, next []int) (kept, gave, took []int) {
	for _, p := range owned {
		if slices.Contains(next, p) {
			kept = append(kept, p)
		} else {
			gave = append(gave, p)
		}
	}
	for _, p := range next {
		if !slices.Contains(owned, p) {
			took = append(took, p)
		}
	}
	return kept, gave, took
}

// done is the current processor's end, nil (never ready) without one.
func (m *memberLoop) done() <-chan error {
	if m.run == nil {
		return nil
	}
	return m.run.done
}

// stopped handles the end of the current processor: an invalid config ends
// Run; anything else (a stream unreachable for a while, a cluster node
// dying under a request) starts it again on the next beat, with a warm-up,
// rather than leave the partitions to no one until the member's TTL runs
// out.
func (m *memberLoop) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("processor stopped")
	}
	if errors.Is(err, ErrInvalidConfig) {
		return err
	}
	m.e.log.Warn("processor stopped; restarting it", "err", err, "partitions", m.owned)
	m.stop()
	return nil
}

// replaceWait is how long a rebalance waits for the processor it replaces
// to return before it starts the next one regardless.
const replaceWait = 2 * time.Second

// stop cancels the current processor and forgets its partitions. It waits
// for it to return, but not beyond replaceWait: a processor stuck in a
// request of the client library (an ordered consumer re-creating itself
// while the cluster elects leaders) must not stop the heartbeat. A
// processor cancelled publishes nothing more, so one still returning
// while its successor starts does no harm; Run waits for both at the end.
func (m *memberLoop) stop() {
	m.owned = nil
	if m.run == nil {
		return
	}
	r := m.run
	m.run = nil
	m.e.mu.Lock()
	m.e.cur = nil
	m.e.mu.Unlock()
	r.cancel()
	t := time.NewTimer(replaceWait)
	defer t.Stop()
	select {
	case <-r.exited:
	case <-t.C:
		m.e.log.Warn("processor group: the processor being replaced has not returned yet; going on", "waited", replaceWait)
	}
}

// leave stops the processor, waits for every processor started, and
// deletes the member's key: the others take the partitions over now
// instead of after the TTL.
func (m *memberLoop) leave(ctx context.Context) {
	m.stop()
	m.procs.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := m.kv.Delete(dctx, m.key); err != nil {
		m.e.log.Warn("leaving the processor group", "err", err)
	}
}

// bucket opens the members bucket, creating it when missing. Members
// starting together race to create it; each attempt has its own timeout so
// that a request lost in a cluster election is retried.
func (e *Elastic) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	b := retry.NewBackoff(retry.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second})
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		kv, err := e.js.KeyValue(actx, MembersBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = e.js.CreateOrUpdateKeyValue(actx, jetstream.KeyValueConfig{
				Bucket:      MembersBucket,
				Description: "rdmawatch processor group members (heartbeats)",
				TTL:         e.ttl,
				History:     1,
				Replicas:    e.replicas(actx),
			})
		}
		cancel()
		if err == nil {
			return kv, nil
		}
		if attempt == 10 {
			return nil, fmt.Errorf("processor group bucket %s: %w", MembersBucket, err)
		}
		e.log.Warn("processor group bucket; retrying", "bucket", MembersBucket, "attempt", attempt, "err", err)
		if retry.Sleep(ctx, b.Next()) != nil {
			return nil, ctx.Err()
		}
	}
}

// replicas follows the counters stream: a group on an R3 cluster must
// survive a node as well as the streams do.
func (e *Elastic) replicas(ctx context.Context) int {
	s, err := e.js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		return 1
	}
	if r := s.CachedInfo().Config.Replicas; r > 0 {
		return r
	}
	return 1
}

// listedMember is one live key of the group: the member's name and what
// it claims (legacy: a heartbeat without a claim).
type listedMember struct {
	name   string
	claim  []int
	legacy bool
	// beat is when the server stored the member's last heartbeat: its
	// key expires the TTL after it.
	beat time.Time
}

// listMembers reads the group's live keys with their claims, sorted by
// name. A value that does not parse counts as a member claiming nothing,
// logged: it keeps its place in the split, and takes nothing from anyone.
func (e *Elastic) listMembers(ctx context.Context, kv jetstream.KeyValue) ([]listedMember, error) {
	w, err := kv.WatchFiltered(ctx, []string{e.group + ".*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []listedMember
	for {
		var entry jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			// A listing cut short (a KV leader election outlasting the
			// request's deadline) is not the membership, and taken for
			// it the member would take or drop partitions the others own.
			return nil, fmt.Errorf("listing the members of %s: %w", e.group, ctx.Err())
		case en, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("listing the members of %s: the watcher stopped", e.group)
			}
			entry = en
		}
		if entry == nil {
			break // every key present at the start has been delivered
		}
		l := listedMember{name: strings.TrimPrefix(entry.Key(), e.group+"."), beat: entry.Created()}
		var perr error
		l.claim, l.legacy, perr = parseClaim(entry.Value())
		if perr != nil {
			e.log.Warn("processor group: unreadable heartbeat; the member counts as claiming nothing", "member", l.name, "err", perr)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

type runningProc struct {
	cancel context.CancelFunc
	// done receives Run's error when it returns on its own (not
	// cancelled); exited is closed when it returned either way.
	done   chan error
	exited chan struct{}
}

// resetAttempts bounds the ordered consumers of a group's processors (see
// natsutil.BoundedResets): a consumer that cannot be re-created ends the
// processor, which the group starts again on its next beat.
const resetAttempts = natsutil.DefaultResetAttempts

// start runs a processor on owned with a warm-up: on a takeover its
// windows are rebuilt from the stream. procs counts it until it returns.
func (e *Elastic) start(ctx context.Context, owned []int, members []string, procs *sync.WaitGroup) (*runningProc, error) {
	cfg := e.cfg
	cfg.Instance, cfg.Instances, cfg.OwnedPartitions = 0, 1, owned
	cfg.Name = fmt.Sprintf("%s group %s member %s", e.cfg.Name, e.group, e.name)
	p, err := New(natsutil.BoundedResets(e.js, resetAttempts), cfg, e.log)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.cur = p
	e.rebalances++
	e.mu.Unlock()
	e.log.Info("processor group: taking partitions", "partitions", owned, "members", members)
	pctx, cancel := context.WithCancel(ctx)
	r := &runningProc{cancel: cancel, done: make(chan error, 1), exited: make(chan struct{})}
	procs.Add(1)
	go func() {
		defer procs.Done()
		defer close(r.exited)
		err := p.Run(pctx)
		if pctx.Err() == nil {
			r.done <- err
		}
	}()
	return r, nil
}
