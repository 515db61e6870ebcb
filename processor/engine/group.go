package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// whose entries expire after MemberTTL; every member lists the live keys of
// its group and owns partition p when p % len(members) is its index among
// the sorted member names. When a member joins, leaves (it deletes its key)
// or dies (its key expires), every member computes the same new split, and
// a member whose set of partitions changed restarts its processor on the
// new set with a warm-up: its windows are rebuilt from the stream and the
// events stream says which incident revisions are out already, so the
// incidents of a dead member continue under the same ids and none is
// published twice (published.go).
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

// assign is the group's split: partition p goes to the member at p mod
// len(members) of the sorted names. Every member computes it alike from the
// same membership.
func assign(members []string, member string, partitions int) []int {
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
	tick := time.NewTicker(e.ttl / 4)
	defer tick.Stop()
	for {
		var members []string
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
			// that their current owners notice it and let them go first.
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
		case err := <-m.done():
			if err := m.stopped(ctx, err); err != nil {
				return err
			}
		}
	}
}

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
	// procs counts the processors started and not yet returned, the
	// replaced ones included.
	procs sync.WaitGroup
}

// beat puts the member's key; it returns the error after logging it.
func (m *memberLoop) beat(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, m.e.requestTimeout())
	defer cancel()
	_, err := m.kv.Put(rctx, m.key, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	switch {
	case err == nil:
		m.lastBeat = time.Now()
	case ctx.Err() == nil:
		m.e.log.Warn("processor group heartbeat", "err", err)
	}
	return err
}

// follow moves to the partitions members assign this member, if they
// changed.
func (m *memberLoop) follow(ctx context.Context, members []string) error {
	e := m.e
	e.mu.Lock()
	e.members = members
	e.mu.Unlock()
	want := assign(members, e.name, e.cfg.Partitions)
	if slices.Equal(want, m.owned) {
		return nil
	}
	m.stop()
	m.owned = want
	if len(want) == 0 {
		e.log.Info("processor group: no partition for this member", "members", members)
		return nil
	}
	run, err := e.start(ctx, want, members, &m.procs)
	if err != nil {
		return err
	}
	m.run = run
	return nil
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

func (e *Elastic) listMembers(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	lister, err := kv.ListKeysFiltered(ctx, e.group+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, strings.TrimPrefix(k, e.group+"."))
	}
	_ = lister.Stop()
	// The lister closes its channel when ctx ends as well as when every
	// key is listed: a listing cut short (a KV leader election outlasting
	// the request's deadline) is not the membership, and taken for it
	// the member would take or drop partitions the others own.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing the members of %s: %w", e.group, err)
	}
	sort.Strings(out)
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
