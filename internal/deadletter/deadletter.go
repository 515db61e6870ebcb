// Package deadletter is the operator's side of the dead-letter stream
// (schemas.StreamDeadLetter): it lists the messages the roles refused, by
// role, origin, reason and time, decodes one for reading, redrives them to
// the subject they came from, and measures the stream's depth.
//
// The roles write dead letters with natsutil.DeadLetter; nothing here runs
// in a role. It is a package of its own rather than more of natsutil, which
// every role links for connecting and checking streams: reading, decoding
// and deleting dead letters is an admin's job, with an admin's NATS rights.
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Roles are the roles that may write dead letters (schemas.HeaderDeadRole).
var Roles = []string{"collector", "processor", "sink", "alert"}

// Letter is one dead letter: where it is in the dead-letter stream, what
// its headers say about its origin, and (from Get only) its payload.
type Letter struct {
	// Seq is its sequence in the dead-letter stream: what show and
	// redrive take.
	Seq uint64 `json:"seq"`
	// Time is when it was stored in the dead-letter stream, that is when
	// the role refused the message; the headers carry no time of their own.
	Time time.Time `json:"time"`
	Role string    `json:"role"`
	// Stream, Subject and StreamSeq name the original message.
	Stream    string `json:"stream"`
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq,omitempty"`
	// Delivered is how many times the role had been given it.
	Delivered uint64 `json:"delivered,omitempty"`
	Reason    string `json:"reason"`
	// Size is the payload's length in bytes.
	Size int `json:"size"`
	// DeadSubject is its subject in the dead-letter stream,
	// rdmawatch.deadletter.<role>.<stream>.
	DeadSubject string `json:"dead_subject"`

	Header nats.Header `json:"-"`
	// Data is the original payload, untouched; nil in what List gives.
	Data []byte `json:"-"`
}

// deadPrefix is the dead-letter subjects' common prefix,
// "rdmawatch.deadletter.".
var deadPrefix = strings.TrimSuffix(schemas.DeadLetterAllFilter, ">")

// letterOf reads a dead letter's headers. A header that is missing or does
// not parse is left empty: ls shows what there is, and Redrive refuses a
// letter without a stream or subject.
func letterOf(seq uint64, stored time.Time, deadSubject string, h nats.Header, size int) Letter {
	l := Letter{
		Seq: seq, Time: stored.UTC(), DeadSubject: deadSubject, Header: h, Size: size,
		Role:    h.Get(schemas.HeaderDeadRole),
		Stream:  h.Get(schemas.HeaderDeadStream),
		Subject: h.Get(schemas.HeaderDeadSubject),
		Reason:  h.Get(schemas.HeaderDeadReason),
	}
	l.StreamSeq, _ = strconv.ParseUint(h.Get(schemas.HeaderDeadStreamSeq), 10, 64)
	l.Delivered, _ = strconv.ParseUint(h.Get(schemas.HeaderDeadDelivered), 10, 64)
	// The subject names role and stream too (DeadLetterSubject): a letter
	// whose headers lost them still lists under its role and stream.
	if role, stream, ok := parseDeadSubject(deadSubject); ok {
		if l.Role == "" {
			l.Role = role
		}
		if l.Stream == "" {
			l.Stream = stream
		}
	}
	return l
}

// parseDeadSubject splits rdmawatch.deadletter.<role>.<stream>.
func parseDeadSubject(s string) (role, stream string, ok bool) {
	rest, ok := strings.CutPrefix(s, deadPrefix)
	if !ok {
		return "", "", false
	}
	role, stream, ok = strings.Cut(rest, ".")
	if !ok || role == "" || stream == "" || strings.Contains(stream, ".") {
		return "", "", false
	}
	return role, stream, true
}

// DataStreams are the streams a dead letter can come from, and so the only
// ones a redrive may publish to: every rdmawatch stream but the dead-letter
// stream itself.
func DataStreams() []jetstream.StreamConfig {
	var out []jetstream.StreamConfig
	for _, c := range schemas.Streams(schemas.StreamOptions{}) {
		if c.Name != schemas.StreamDeadLetter {
			out = append(out, c)
		}
	}
	return out
}

// StreamName reads a --stream value: a stream's name (RDMAWATCH_COUNTERS)
// or its short form (counters), in any case.
func StreamName(s string) (string, error) {
	var names []string
	for _, c := range DataStreams() {
		short := strings.TrimPrefix(c.Name, "RDMAWATCH_")
		if strings.EqualFold(s, c.Name) || strings.EqualFold(s, short) {
			return c.Name, nil
		}
		names = append(names, c.Name)
	}
	return "", fmt.Errorf("stream %q: want one of %s (or counters, events, inventory)", s, strings.Join(names, ", "))
}

// Filter selects dead letters; its zero value selects every one.
type Filter struct {
	Roles   []string // any of these roles; empty: all
	Streams []string // from any of these streams (full names); empty: all
	// Reason selects letters whose reason contains it, ignoring case.
	Reason string
	// Since and Until bound the time a letter was stored; zero: unbounded.
	Since, Until time.Time
	// Limit stops after this many letters, oldest first; 0: no limit.
	Limit int
}

// Check refuses a role or stream no dead letter can have, and bounds that
// cannot both hold.
func (f Filter) Check() error {
	for _, r := range f.Roles {
		if !slices.Contains(Roles, r) {
			return fmt.Errorf("role %q: want one of %s", r, strings.Join(Roles, ", "))
		}
	}
	for _, s := range f.Streams {
		if _, err := StreamName(s); err != nil {
			return err
		}
	}
	if f.Limit < 0 {
		return fmt.Errorf("limit %d: want 0 (no limit) or more", f.Limit)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until) {
		return fmt.Errorf("since %s is after until %s: nothing can match", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return nil
}

// Narrowed reports whether f selects by anything at all.
func (f Filter) Narrowed() bool {
	return len(f.Roles) > 0 || len(f.Streams) > 0 || f.Reason != "" || !f.Since.IsZero() || !f.Until.IsZero()
}

// subjects are the consumer's subject filters: role and stream are tokens
// of the dead-letter subject, so the server does that part of the work.
func (f Filter) subjects() []string {
	roles, streams := uniq(f.Roles), uniq(f.Streams)
	switch {
	case len(roles) == 0 && len(streams) == 0:
		return []string{schemas.DeadLetterAllFilter}
	case len(streams) == 0:
		streams = []string{"*"}
	case len(roles) == 0:
		roles = []string{"*"}
	}
	var out []string
	for _, r := range roles {
		for _, s := range streams {
			out = append(out, deadPrefix+token(r)+"."+token(s))
		}
	}
	return out
}

func token(s string) string {
	if s == "*" {
		return s
	}
	return schemas.SubjectToken(s)
}

// uniq drops repeats: the server refuses overlapping subject filters.
func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// match is what the subject filters do not select.
func (f Filter) match(l Letter) bool {
	if f.Reason != "" && !strings.Contains(strings.ToLower(l.Reason), strings.ToLower(f.Reason)) {
		return false
	}
	if !f.Since.IsZero() && l.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && l.Time.After(f.Until) {
		return false
	}
	return true
}

// Reader reads and redrives the dead-letter stream.
type Reader struct {
	js  jetstream.JetStream
	str jetstream.Stream
}

// Open looks the dead-letter stream up; its absence is an error naming the
// admin step that creates it.
func Open(ctx context.Context, js jetstream.JetStream) (*Reader, error) {
	str, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("stream %s (created by the admin step, rdmawatch streams apply): %w", schemas.StreamDeadLetter, err)
	}
	return &Reader{js: js, str: str}, nil
}

// fetchWait bounds one fetch; an empty fetch is followed by a look at the
// consumer's pending count, so a letter deleted while List runs (a redrive
// elsewhere) cannot make it wait for ever.
const fetchWait = 2 * time.Second

// List calls fn with each dead letter f selects, oldest first, without its
// payload (Size says how large it is), and returns once it has seen what
// the stream held when it started. It reads headers only: listing a full
// stream moves kilobytes, not the gigabyte of payloads it may hold.
func (r *Reader) List(ctx context.Context, f Filter, fn func(Letter) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	streams := make([]string, len(f.Streams))
	for i, s := range f.Streams {
		streams[i], _ = StreamName(s)
	}
	f.Streams = streams
	info, err := r.str.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", schemas.StreamDeadLetter, err)
	}
	// Stop at what was there at the start: roles may add letters meanwhile.
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: f.subjects(), DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true}
	if !f.Since.IsZero() {
		since := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := r.str.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("stream %s: consumer: %w", schemas.StreamDeadLetter, err)
	}
	pending := func() (uint64, error) {
		ci, err := cons.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("stream %s: consumer: %w", schemas.StreamDeadLetter, err)
		}
		return ci.NumPending, nil
	}
	if n, err := pending(); err != nil || n == 0 {
		return err
	}
	listed := 0
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			return fmt.Errorf("stream %s: %w", schemas.StreamDeadLetter, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("stream %s: %w", schemas.StreamDeadLetter, err)
			}
			size, _ := strconv.Atoi(m.Headers().Get(nats.MsgSize))
			l := letterOf(md.Sequence.Stream, md.Timestamp, m.Subject(), m.Headers(), size)
			if f.match(l) {
				if err := fn(l); err != nil {
					return err
				}
				if listed++; f.Limit > 0 && listed >= f.Limit {
					return nil
				}
			}
			if md.NumPending == 0 || md.Sequence.Stream >= last {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("stream %s: %w", schemas.StreamDeadLetter, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if got == 0 {
			if n, err := pending(); err != nil || n == 0 {
				return err
			}
		}
	}
}

// ErrNotFound is wrapped when a sequence holds no dead letter.
var ErrNotFound = errors.New("no such dead letter")

// Get reads dead letter seq with its payload.
func (r *Reader) Get(ctx context.Context, seq uint64) (Letter, error) {
	m, err := r.str.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Letter{}, fmt.Errorf("dead letter %d: %w in %s (deleted, redriven, aged out, or never there: rdmawatch deadletter ls)", seq, ErrNotFound, schemas.StreamDeadLetter)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	l := letterOf(m.Sequence, m.Time, m.Subject, m.Header, len(m.Data))
	l.Data = m.Data
	return l, nil
}
