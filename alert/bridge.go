// Package alert delivers rdmawatch incidents to the systems that page people:
// Alertmanager (v2 API) and generic webhooks. It is a role of its own, like the
// sink: a durable JetStream consumer per target, one event in flight at a time
// so every target sees an incident's revisions in order, an ack only after the
// target accepted the event, and a dead letter with the reason when a target
// refuses an event or keeps failing.
package alert

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid alert config")

// Role is the name the bridge uses for its dead letters.
const Role = "alert"

// Config says where incidents go and how hard to try.
type Config struct {
	Alertmanagers []string // base URLs, e.g. http://alertmanager:9093
	Webhooks      []string // URLs that receive one JSON POST per state change
	// Labels are added to every Alertmanager alert (e.g. fabric=pod-a).
	Labels map[string]string
	// RunbookURL is a URL template for the runbook_url annotation; {type}
	// is replaced with the incident type.
	RunbookURL string
	// ResendInterval is how often open incidents are re-sent to
	// Alertmanager; each send holds the alert for 4 intervals, so an
	// Alertmanager resolves it by itself within 4 intervals after the bridge
	// stops (Prometheus does the same with its evaluation interval).
	ResendInterval time.Duration
	// MaxAttempts bounds the deliveries of one event to one target before it
	// goes to the dead-letter stream.
	MaxAttempts int
	// RetryMin and RetryMax bound the exponential backoff between attempts.
	RetryMin, RetryMax time.Duration
	// HTTPTimeout bounds one request.
	HTTPTimeout time.Duration
	// ConsumerPrefix names the durable consumers (one per target).
	ConsumerPrefix string
	// FilterSubject narrows the events delivered (NATS wildcards over
	// rdmawatch.events.>); empty: every event.
	FilterSubject string
}

func (c Config) withDefaults() Config {
	if c.ResendInterval <= 0 {
		c.ResendInterval = time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 500 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Minute
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = 10 * time.Second
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = "rdmawatch-alert"
	}
	if c.FilterSubject == "" {
		c.FilterSubject = schemas.EventsAllFilter
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.Alertmanagers)+len(c.Webhooks) == 0 {
		return fmt.Errorf("%w: no target: give at least one Alertmanager or webhook URL", ErrInvalidConfig)
	}
	for _, u := range append(append([]string{}, c.Alertmanagers...), c.Webhooks...) {
		if err := checkURL(u); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		return fmt.Errorf("%w: retry min %s above max %s", ErrInvalidConfig, c.RetryMin, c.RetryMax)
	}
	return nil
}

// Stats counts what the bridge did, per target name.
type Stats struct {
	Delivered   map[string]uint64
	Failures    map[string]uint64 // failed attempts, retried or not
	DeadLetters map[string]uint64
	Open        int // incidents held open toward Alertmanager
}

// Bridge runs one delivery loop per target.
type Bridge struct {
	js      jetstream.JetStream
	cfg     Config
	log     *slog.Logger
	targets []*target

	mu   sync.Mutex
	open map[string]*schemas.Event // latest revision of each open incident
}

type target struct {
	name     string
	consumer string
	deliver  func(context.Context, *schemas.Event) error
	am       *Alertmanager // nil for webhooks

	delivered, failures, dead atomic.Uint64
}

// New checks cfg; nothing runs until Run.
func New(js jetstream.JetStream, cfg Config, log *slog.Logger) (*Bridge, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: no JetStream context", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{js: js, cfg: cfg, log: log.With("component", "alert"), open: map[string]*schemas.Event{}}
	client := &http.Client{Timeout: cfg.HTTPTimeout}
	for _, u := range cfg.Alertmanagers {
		am := &Alertmanager{base: u, client: client, labels: cfg.Labels, runbook: cfg.RunbookURL}
		t := &target{name: am.Name(), consumer: consumerName(cfg.ConsumerPrefix, "am", u), am: am}
		t.deliver = func(ctx context.Context, ev *schemas.Event) error {
			return am.post(ctx, []postableAlert{am.alert(ev, time.Now(), b.hold())})
		}
		b.targets = append(b.targets, t)
	}
	for _, u := range cfg.Webhooks {
		wh := &Webhook{url: u, client: client}
		b.targets = append(b.targets, &target{name: wh.Name(), consumer: consumerName(cfg.ConsumerPrefix, "wh", u), deliver: wh.deliver})
	}
	return b, nil
}

// hold is how long one send keeps an open alert firing in Alertmanager.
func (b *Bridge) hold() time.Duration { return 4 * b.cfg.ResendInterval }

// consumerName is stable for a URL, so a restarted bridge resumes where it
// stopped, and valid as a consumer name whatever the URL holds.
func consumerName(prefix, kind, url string) string {
	h := fnv.New64a()
	h.Write([]byte(url))
	return fmt.Sprintf("%s-%s-%016x", prefix, kind, h.Sum64())
}

// Stats returns a snapshot.
func (b *Bridge) Stats() Stats {
	s := Stats{Delivered: map[string]uint64{}, Failures: map[string]uint64{}, DeadLetters: map[string]uint64{}}
	for _, t := range b.targets {
		s.Delivered[t.name] = t.delivered.Load()
		s.Failures[t.name] = t.failures.Load()
		s.DeadLetters[t.name] = t.dead.Load()
	}
	b.mu.Lock()
	s.Open = len(b.open)
	b.mu.Unlock()
	return s
}

// Run delivers until ctx ends. Consumers are created first, so no event that
// arrives while the bridge starts is missed; then the open incidents are
// learned from the stream's history, so an Alertmanager that lost its state
// (or a bridge that restarted) gets every open incident on the next resend.
func (b *Bridge) Run(ctx context.Context) error {
	conss := make([]jetstream.Consumer, len(b.targets))
	for i, t := range b.targets {
		c, err := b.js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
			Durable:       t.consumer,
			Description:   "rdmawatch alert bridge: " + t.name,
			DeliverPolicy: jetstream.DeliverNewPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			// One at a time: a target sees an incident's revisions in order,
			// and a failing target holds its own queue, not the others'.
			MaxAckPending: 1,
			AckWait:       30 * time.Second,
			FilterSubject: b.cfg.FilterSubject,
		})
		if err != nil {
			return fmt.Errorf("alert: consumer for %s: %w", t.name, err)
		}
		conss[i] = c
	}
	if len(b.cfg.Alertmanagers) > 0 {
		if err := b.learnOpen(ctx); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(b.targets))
	for i, t := range b.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.consume(ctx, t, conss[i]); err != nil {
				errc <- err
			}
		}()
	}
	if len(b.cfg.Alertmanagers) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.resendLoop(ctx)
		}()
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// learnOpen reads the events stream's history once, keeping the latest
// revision of every incident, and holds the open ones.
func (b *Bridge) learnOpen(ctx context.Context) error {
	oc, err := b.js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.cfg.FilterSubject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("alert: reading event history: %w", err)
	}
	info, err := oc.Info(ctx)
	if err != nil {
		return fmt.Errorf("alert: reading event history: %w", err)
	}
	pending := info.NumPending
	for pending > 0 {
		batch, err := oc.Fetch(int(min(pending, 512)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("alert: reading event history: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if ev, err := schemas.DecodeEvent(msg.Data()); err == nil {
				b.track(ev)
			}
			if md, err := msg.Metadata(); err == nil {
				pending = md.NumPending
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			return fmt.Errorf("alert: reading event history: %w", err)
		}
		if n == 0 {
			break
		}
	}
	b.log.Info("alert: open incidents learned from the events stream", "open", b.Stats().Open)
	return nil
}

// track keeps the latest revision of each open incident.
func (b *Bridge) track(ev *schemas.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.open[ev.ID]; ok && cur.Revision > ev.Revision {
		return
	}
	if ev.State == schemas.StateResolved {
		delete(b.open, ev.ID)
		return
	}
	b.open[ev.ID] = ev
}

func (b *Bridge) consume(ctx context.Context, t *target, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		return fmt.Errorf("alert: %s: %w", t.name, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			b.log.Warn("alert: fetching events", "target", t.name, "err", err)
			continue
		}
		b.handle(ctx, t, msg)
	}
}

// handle delivers one event to one target, retrying with backoff, and acks,
// dead-letters or (on shutdown) leaves it for redelivery.
func (b *Bridge) handle(ctx context.Context, t *target, msg jetstream.Msg) {
	ev, err := schemas.DecodeEvent(msg.Data())
	if err != nil {
		b.deadLetter(ctx, t, msg, err.Error())
		return
	}
	if t.am != nil {
		b.track(ev)
	}
	wait := retry.NewBackoff(retry.Policy{Initial: b.cfg.RetryMin, Max: b.cfg.RetryMax})
	for attempt := 1; ; attempt++ {
		err := t.deliver(ctx, ev)
		if err == nil {
			if err := msg.DoubleAck(ctx); err != nil {
				b.log.Warn("alert: ack", "target", t.name, "event", ev.MsgID(), "err", err)
			}
			t.delivered.Add(1)
			b.log.Debug("alert: delivered", "target", t.name, "event", ev.MsgID(), "attempts", attempt)
			return
		}
		if ctx.Err() != nil {
			return // not acked: the next bridge delivers it
		}
		t.failures.Add(1)
		if retry.IsPermanent(err) || attempt >= b.cfg.MaxAttempts {
			b.deadLetter(ctx, t, msg, fmt.Sprintf("%s refused event %s after %d attempt(s): %v", t.name, ev.MsgID(), attempt, err))
			return
		}
		d := wait.Next()
		b.log.Warn("alert: delivery failed, retrying", "target", t.name, "event", ev.MsgID(), "attempt", attempt, "retry_in", d.Round(time.Millisecond), "err", err)
		_ = msg.InProgress()
		if retry.Sleep(ctx, d) != nil {
			return
		}
	}
}

func (b *Bridge) deadLetter(ctx context.Context, t *target, msg jetstream.Msg, reason string) {
	t.dead.Add(1)
	b.log.Error("alert: event to the dead-letter stream", "target", t.name, "reason", reason)
	if err := natsutil.DeadLetter(ctx, b.js, Role, msg, reason); err != nil {
		b.log.Error("alert: dead letter failed; the event will be redelivered", "target", t.name, "err", err)
		_ = msg.Nak()
	}
}

// resendLoop re-sends every open incident to every Alertmanager before the
// hold of its last send runs out.
func (b *Bridge) resendLoop(ctx context.Context) {
	tick := time.NewTicker(b.cfg.ResendInterval)
	defer tick.Stop()
	for {
		b.resend(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (b *Bridge) resend(ctx context.Context) {
	b.mu.Lock()
	evs := make([]*schemas.Event, 0, len(b.open))
	for _, ev := range b.open {
		evs = append(evs, ev)
	}
	b.mu.Unlock()
	if len(evs) == 0 {
		return
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
	now := time.Now()
	for _, t := range b.targets {
		if t.am == nil {
			continue
		}
		alerts := make([]postableAlert, len(evs))
		for i, ev := range evs {
			alerts[i] = t.am.alert(ev, now, b.hold())
		}
		if err := t.am.post(ctx, alerts); err != nil && ctx.Err() == nil {
			t.failures.Add(1)
			b.log.Warn("alert: re-sending open incidents", "target", t.name, "open", len(evs), "err", err)
		}
	}
}
