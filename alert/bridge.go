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
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid alert config")

// Role is the name the bridge uses for its dead letters.
const Role = "alert"

// Defaults of the zero Config.
const (
	DefaultMaxOpen    = 10000
	DefaultAckWait    = 30 * time.Second
	defaultBatch      = 500
	defaultBatchBytes = 1 << 20
)

// Config says where incidents go and how hard to try.
type Config struct {
	// Alertmanagers are "name=URL" or base URLs, e.g.
	// am-1=http://alertmanager:9093. The name (given, or derived from the
	// URL without its secrets) is all that logs, metrics, dead letters and
	// the consumer show, and names the consumer: a rotated password keeps
	// it.
	Alertmanagers []string
	// Webhooks are "name=URL" or URLs that receive one JSON POST per state
	// change; a token in the URL (path or query) is never shown.
	Webhooks []string
	// WebhookSecret, when set, signs every webhook request (HeaderSignature,
	// HeaderTimestamp): the receiver can tell rdmawatch's requests from
	// anyone's who learnt its URL.
	WebhookSecret []byte
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
	// MaxOpen bounds the open incidents held toward Alertmanager (and
	// re-sent every interval): an event that would open one more goes to
	// the dead-letter stream instead, so forged or runaway incidents cannot
	// grow the bridge's memory and its re-sends without end.
	MaxOpen int
	// MaxBatch bounds the alerts of one POST to Alertmanager; a re-send of
	// more open incidents is split.
	MaxBatch int
	// MaxAttempts bounds the deliveries of one event to one target before it
	// goes to the dead-letter stream.
	MaxAttempts int
	// RetryMin and RetryMax bound the exponential backoff between attempts.
	RetryMin, RetryMax time.Duration
	// HTTPTimeout bounds one request; at most half of AckWait, so an
	// attempt never outlasts the ack window.
	HTTPTimeout time.Duration
	// AckWait is the consumers' ack wait. The event in hand is kept in
	// progress every AckWait/3 while the bridge waits to retry, so it is
	// never redelivered (and handled twice) because a wait was long.
	AckWait time.Duration
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
	if c.MaxOpen <= 0 {
		c.MaxOpen = DefaultMaxOpen
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = defaultBatch
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
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = "rdmawatch-alert"
	}
	if c.FilterSubject == "" {
		c.FilterSubject = schemas.EventsAllFilter
	}
	return c
}

// labelName is Prometheus's (and Alertmanager's) label name; names starting
// with __ are reserved.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.Alertmanagers)+len(c.Webhooks) == 0 {
		return fmt.Errorf("%w: no target: give at least one Alertmanager or webhook URL", ErrInvalidConfig)
	}
	if _, _, err := c.targets(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	for k := range c.Labels {
		if !labelName.MatchString(k) || strings.HasPrefix(k, "__") {
			return fmt.Errorf("%w: label name %q: want letters, digits and '_', not starting with a digit or __", ErrInvalidConfig, k)
		}
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		return fmt.Errorf("%w: retry min %s above max %s", ErrInvalidConfig, c.RetryMin, c.RetryMax)
	}
	if c.MaxOpen < 0 || c.MaxBatch < 0 || c.MaxAttempts < 0 {
		return fmt.Errorf("%w: max open incidents %d, batch %d, max attempts %d: want 0 (the default) or more", ErrInvalidConfig, c.MaxOpen, c.MaxBatch, c.MaxAttempts)
	}
	if d := c.withDefaults(); d.HTTPTimeout > d.AckWait/2 {
		return fmt.Errorf("%w: HTTP timeout %s above half the ack wait %s: an attempt would outlast the ack window", ErrInvalidConfig, d.HTTPTimeout, d.AckWait)
	}
	return nil
}

// targets parses the target specs; two of a kind may not share a name (it
// names their consumer).
func (c Config) targets() (ams, whs []Target, err error) {
	parse := func(kind string, specs []string) ([]Target, error) {
		var out []Target
		seen := map[string]bool{}
		for _, spec := range specs {
			t, err := ParseTarget(spec)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kind, err)
			}
			if seen[t.Name] {
				return nil, fmt.Errorf("%s: two targets named %q: give each its own name (name=URL)", kind, t.Name)
			}
			seen[t.Name] = true
			out = append(out, t)
		}
		return out, nil
	}
	if ams, err = parse("alertmanager", c.Alertmanagers); err != nil {
		return nil, nil, err
	}
	if whs, err = parse("webhook", c.Webhooks); err != nil {
		return nil, nil, err
	}
	return ams, whs, nil
}

// Stats counts what the bridge did, per target name.
type Stats struct {
	Delivered   map[string]uint64
	Failures    map[string]uint64 // failed attempts, retried or not
	DeadLetters map[string]uint64
	Open        int // incidents held open toward Alertmanager
	// Refused counts the state changes of incidents not held because
	// MaxOpen incidents were open (dead-lettered, or skipped in the history
	// read at start).
	Refused uint64
}

// Bridge runs one delivery loop per target.
type Bridge struct {
	js      jetstream.JetStream
	cfg     Config
	log     *slog.Logger
	targets []*target
	secrets []string // every target URL's secrets, scrubbed from what is shown
	now     func() time.Time

	mu      sync.Mutex
	open    map[string]*schemas.Event // latest revision of each open incident
	refused atomic.Uint64
}

type target struct {
	name     string
	consumer string
	deliver  func(context.Context, *schemas.Event) error
	am       *Alertmanager // nil for webhooks

	delivered, failures, dead atomic.Uint64
}

// New checks cfg; nothing runs until Run. Everything the bridge logs passes
// through redact.
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
	ams, whs, _ := cfg.targets()
	b := &Bridge{js: js, cfg: cfg, log: slog.New(redact.Handler(log.Handler())).With("component", "alert"),
		open: map[string]*schemas.Event{}, now: time.Now}
	client := &http.Client{Timeout: cfg.HTTPTimeout}
	for _, tg := range ams {
		u, _ := url.Parse(tg.URL) // checked by Validate
		b.secrets = append(b.secrets, secretsOf(u)...)
		am := &Alertmanager{name: tg.Name, base: u, client: client, labels: cfg.Labels, runbook: cfg.RunbookURL,
			maxBatch: cfg.MaxBatch, maxBatchBytes: defaultBatchBytes}
		t := &target{name: am.Name(), consumer: consumerName(cfg.ConsumerPrefix, "am", tg), am: am}
		t.deliver = func(ctx context.Context, ev *schemas.Event) error {
			return am.post(ctx, []postableAlert{am.alert(ev, b.now(), b.hold())})
		}
		b.targets = append(b.targets, t)
	}
	for _, tg := range whs {
		u, _ := url.Parse(tg.URL)
		b.secrets = append(b.secrets, secretsOf(u)...)
		wh := &Webhook{name: tg.Name, url: tg.URL, client: client, secret: cfg.WebhookSecret, now: func() time.Time { return b.now() }}
		b.targets = append(b.targets, &target{name: wh.Name(), consumer: consumerName(cfg.ConsumerPrefix, "wh", tg), deliver: wh.deliver})
	}
	// Longest first: a secret that contains another is masked whole.
	sort.Slice(b.secrets, func(i, j int) bool { return len(b.secrets[i]) > len(b.secrets[j]) })
	return b, nil
}

// hold is how long one send keeps an open alert firing in Alertmanager.
func (b *Bridge) hold() time.Duration { return 4 * b.cfg.ResendInterval }

// show is s as every output of the bridge may show it: redacted, and
// without any secret of the targets' URLs even where a receiver's answer
// quotes it without its URL.
func (b *Bridge) show(s string) string { return scrub(s, b.secrets) }

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
	s.Refused = b.refused.Load()
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
			Durable: t.consumer,
			// Stored with the stream on disk: the name, never the URL.
			Description:   redact.String("rdmawatch alert bridge: " + t.name),
			DeliverPolicy: jetstream.DeliverNewPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			// One at a time: a target sees an incident's revisions in order,
			// and a failing target holds its own queue, not the others'.
			MaxAckPending: 1,
			AckWait:       b.cfg.AckWait,
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
	refused := 0
	for pending > 0 {
		batch, err := oc.Fetch(int(min(pending, 512)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("alert: reading event history: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if ev, err := schemas.DecodeEvent(msg.Data()); err == nil && deliverable(ev) == nil && !b.track(ev) {
				refused++
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
	if refused > 0 {
		b.refused.Add(uint64(refused))
		b.log.Warn("alert: more open incidents in the events stream than the bridge holds; the rest are not re-sent",
			"max_open", b.cfg.MaxOpen, "refused", refused)
	}
	b.log.Info("alert: open incidents learned from the events stream", "open", b.Stats().Open)
	return nil
}

// track keeps the latest revision of each open incident; it refuses (false)
// an incident it does not hold yet when MaxOpen are held.
func (b *Bridge) track(ev *schemas.Event) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.open[ev.ID]
	if ok && cur.Revision > ev.Revision {
		return true
	}
	if ev.State == schemas.StateResolved {
		delete(b.open, ev.ID)
		return true
	}
	if !ok && len(b.open) >= b.cfg.MaxOpen {
		return false
	}
	b.open[ev.ID] = ev
	return true
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
// dead-letters or (on shutdown) leaves it for redelivery. What can never be
// delivered (an event that does not decode or cannot be sent, an incident
// beyond MaxOpen, a 4xx answer) goes to the dead letters at once; while it
// waits to retry, the event is kept in progress so its ack window never
// runs out.
func (b *Bridge) handle(ctx context.Context, t *target, msg jetstream.Msg) {
	ev, err := schemas.DecodeEvent(msg.Data())
	if err != nil {
		b.deadLetter(ctx, t, msg, fmt.Sprintf("%s: %v", t.name, err))
		return
	}
	if err := deliverable(ev); err != nil {
		b.deadLetter(ctx, t, msg, fmt.Sprintf("%s cannot deliver: %v", t.name, err))
		return
	}
	if t.am != nil && !b.track(ev) {
		b.refused.Add(1)
		b.deadLetter(ctx, t, msg, fmt.Sprintf("%s: %d incidents held open, the bound (max open incidents): incident %.128q not held",
			t.name, b.cfg.MaxOpen, ev.ID))
		return
	}
	wait := retry.NewBackoff(retry.Policy{Initial: b.cfg.RetryMin, Max: b.cfg.RetryMax})
	for attempt := 1; ; attempt++ {
		err := t.deliver(ctx, ev)
		if err == nil {
			if err := msg.DoubleAck(ctx); err != nil {
				b.log.Warn("alert: ack", "target", t.name, "event", ev.MsgID(), "err", b.show(err.Error()))
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
		b.log.Warn("alert: delivery failed, retrying", "target", t.name, "event", ev.MsgID(), "attempt", attempt, "retry_in", d.Round(time.Millisecond), "err", b.show(err.Error()))
		if b.waitInProgress(ctx, msg, d) != nil {
			return
		}
	}
}

// waitInProgress waits d, telling the server every AckWait/3 that the event
// is still in hand: with the HTTP timeout at most AckWait/2, no wait and no
// attempt outlasts the ack window, so the event is not redelivered while it
// is being retried.
func (b *Bridge) waitInProgress(ctx context.Context, msg jetstream.Msg, d time.Duration) error {
	beat := max(b.cfg.AckWait/3, time.Millisecond)
	for d > 0 {
		_ = msg.InProgress()
		step := min(d, beat)
		if err := retry.Sleep(ctx, step); err != nil {
			return err
		}
		d -= step
	}
	_ = msg.InProgress() // the next attempt starts with a full ack window
	return nil
}

// maxField bounds the event fields that go into HTTP headers and
// Alertmanager labels.
const maxField = 512

// deliverable checks what a target cannot take whatever it is sent: the
// fields that become HTTP headers (id, type, state) and Alertmanager labels
// must be UTF-8 without control characters (a CR/LF in a header is refused
// by Go's HTTP client before anything is sent, on every attempt) and of a
// sane length.
func deliverable(ev *schemas.Event) error {
	for _, f := range []struct{ name, v string }{
		{"id", ev.ID}, {"type", ev.Type}, {"state", ev.State}, {"severity", ev.Severity},
		{"scope", ev.Scope}, {"layer", ev.Layer}, {"node", ev.Subject.Node}, {"device", ev.Subject.Device},
	} {
		if len(f.v) > maxField {
			return fmt.Errorf("event %.128q: %s is %d bytes, longer than %d", ev.ID, f.name, len(f.v), maxField)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("event %.128q: %s %.128q is not UTF-8", ev.ID, f.name, f.v)
		}
		if i := strings.IndexFunc(f.v, unicode.IsControl); i >= 0 {
			return fmt.Errorf("event %.128q: %s %.128q holds a control character at byte %d", ev.ID, f.name, f.v, i)
		}
	}
	return nil
}

func (b *Bridge) deadLetter(ctx context.Context, t *target, msg jetstream.Msg, reason string) {
	t.dead.Add(1)
	reason = b.show(reason) // a header of the dead-letter stream: kept, and read by people
	b.log.Error("alert: event to the dead-letter stream", "target", t.name, "reason", reason)
	if err := natsutil.DeadLetter(ctx, b.js, Role, msg, reason); err != nil {
		b.log.Error("alert: dead letter failed; the event will be redelivered", "target", t.name, "err", b.show(err.Error()))
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
	now := b.now()
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
			b.log.Warn("alert: re-sending open incidents", "target", t.name, "open", len(evs), "err", b.show(err.Error()))
		}
	}
}
