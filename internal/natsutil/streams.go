package natsutil

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Stream problems a role refuses to start with.
var (
	ErrStreamMissing      = errors.New("stream missing")
	ErrStreamIncompatible = errors.New("stream incompatible")
)

// applyHint is what an operator runs to fix a missing or incompatible stream.
const applyHint = "run `rdmawatch streams apply` as the NATS admin"

// partitionDest is the only counters transform the processors understand:
// a hash of the node token into N partitions, the node kept as last token.
var partitionDest = regexp.MustCompile(`^rdmawatch\.counters\.\{\{\s*partition\(\s*(\d+)\s*,\s*1\s*\)\s*\}\}\.\{\{\s*wildcard\(\s*1\s*\)\s*\}\}$`)

// wanted is the code's configuration of the stream called name.
func wanted(name string) (jetstream.StreamConfig, bool) {
	for _, cfg := range schemas.Streams(schemas.StreamOptions{}) {
		if cfg.Name == name {
			return cfg, true
		}
	}
	return jetstream.StreamConfig{}, false
}

// CheckStreams verifies, without changing anything, that each named stream
// exists and has what rdmawatch relies on: its subjects and, for the
// counters stream, a partition transform. It never looks at an operator's
// limits (max age, bytes, replicas). The error names the stream and the
// field (subjects, subject_transform, as in the stream's JSON).
func CheckStreams(ctx context.Context, js jetstream.JetStream, names ...string) error {
	var errs []error
	for _, name := range names {
		want, ok := wanted(name)
		if !ok {
			return fmt.Errorf("check streams: %q is not an rdmawatch stream", name)
		}
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("%w: stream %s does not exist; %s", ErrStreamMissing, name, applyHint))
			continue
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		errs = append(errs, compatible(st.CachedInfo().Config, want)...)
	}
	return errors.Join(errs...)
}

// compatible lists how have differs from want in the fields rdmawatch owns.
func compatible(have, want jetstream.StreamConfig) []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: stream %s: %s: %s; %s", ErrStreamIncompatible, want.Name, field, fmt.Sprintf(format, a...), applyHint))
	}
	if !sameSet(have.Subjects, want.Subjects) {
		bad("subjects", "have %q, want %q", have.Subjects, want.Subjects)
	}
	switch {
	case want.SubjectTransform == nil && have.SubjectTransform != nil:
		bad("subject_transform", "have %s -> %s, want none", have.SubjectTransform.Source, have.SubjectTransform.Destination)
	case want.SubjectTransform != nil && have.SubjectTransform == nil:
		bad("subject_transform", "none, want %s -> %s", want.SubjectTransform.Source, want.SubjectTransform.Destination)
	case want.SubjectTransform != nil:
		if _, err := partitionsOf(have); err != nil {
			bad("subject_transform", "%v", err)
		}
	}
	return errs
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// partitionsOf reads N from the counters stream's transform
// rdmawatch.counters.* -> rdmawatch.counters.{{partition(N,1)}}.{{wildcard(1)}}.
func partitionsOf(cfg jetstream.StreamConfig) (int, error) {
	want, _ := wanted(schemas.StreamCounters)
	tr := cfg.SubjectTransform
	if tr == nil {
		return 0, fmt.Errorf("no partition transform, want %s -> %s", want.SubjectTransform.Source, want.SubjectTransform.Destination)
	}
	if tr.Source != want.SubjectTransform.Source {
		return 0, fmt.Errorf("source %q, want %q", tr.Source, want.SubjectTransform.Source)
	}
	m := partitionDest.FindStringSubmatch(tr.Destination)
	if m == nil {
		return 0, fmt.Errorf("destination %q, want %s", tr.Destination, want.SubjectTransform.Destination)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > maxPartitions {
		return 0, fmt.Errorf("destination %q: partition count %s, want 1..%d", tr.Destination, m[1], maxPartitions)
	}
	return n, nil
}

// maxPartitions bounds --partitions: each is a consumer filter.
const maxPartitions = 1024

// Partitions is the partition count of the counters stream, read from its
// transform: processors take it from there, never from a flag that could
// disagree with what collectors' batches are hashed into.
func Partitions(ctx context.Context, js jetstream.JetStream) (int, error) {
	st, err := js.Stream(ctx, schemas.StreamCounters)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, fmt.Errorf("%w: stream %s does not exist; %s", ErrStreamMissing, schemas.StreamCounters, applyHint)
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", schemas.StreamCounters, err)
	}
	n, err := partitionsOf(st.CachedInfo().Config)
	if err != nil {
		return 0, fmt.Errorf("%w: stream %s: subject_transform: %v; %s", ErrStreamIncompatible, schemas.StreamCounters, err, applyHint)
	}
	return n, nil
}

// ApplyOptions say what `rdmawatch streams apply` may change besides what
// rdmawatch owns (subjects, the partition transform). Zero values leave an
// existing stream's setting alone and give a new stream the code's default.
type ApplyOptions struct {
	// Partitions re-partitions the counters stream (0: keep the current
	// count; a new stream gets schemas.DefaultPartitions).
	Partitions int
	// MaxAge and MaxBytes per stream name: an operator's limits are only
	// changed when given here.
	MaxAge   map[string]time.Duration
	MaxBytes map[string]int64
	// Duplicates sets a stream's duplicate window (how long JetStream
	// remembers each Nats-Msg-Id).
	Duplicates map[string]time.Duration
	Replicas   int
	// Memory stores new streams in memory (storage cannot change later).
	Memory bool
}

// Change is one thing ApplyStreams did, for the operator to read.
type Change struct {
	Stream, Field, From, To string
}

func (c Change) String() string {
	if c.Field == "" {
		return fmt.Sprintf("%s: %s", c.Stream, c.To)
	}
	return fmt.Sprintf("%s: %s %s -> %s", c.Stream, c.Field, c.From, c.To)
}

// ApplyStreams is the admin step that owns the streams: it creates the
// missing ones from the code's configuration and, on existing ones, sets
// only the subjects and the partition transform (the count only when
// o.Partitions asks) and the limits o names. Everything else an operator
// set (max age, bytes, replicas, duplicates window) stays. It returns what
// it changed, nothing when all was in place.
func ApplyStreams(ctx context.Context, js jetstream.JetStream, o ApplyOptions) ([]Change, error) {
	if o.Partitions < 0 || o.Partitions > maxPartitions {
		return nil, fmt.Errorf("partitions %d: want 1..%d", o.Partitions, maxPartitions)
	}
	var changes []Change
	for _, want := range schemas.Streams(schemas.StreamOptions{Partitions: o.Partitions, Replicas: o.Replicas, Memory: o.Memory}) {
		st, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := newStreamConfig(want, o)
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				return changes, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			changes = append(changes, Change{Stream: want.Name, To: "created (" + describe(cfg) + ")"})
			continue
		}
		if err != nil {
			return changes, fmt.Errorf("stream %s: %w", want.Name, err)
		}
		cfg, these := streamUpdate(st.CachedInfo().Config, want, o)
		if len(these) == 0 {
			continue
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return changes, fmt.Errorf("update stream %s: %w", want.Name, err)
		}
		changes = append(changes, these...)
	}
	return changes, nil
}

// newStreamConfig is a missing stream's configuration: the code's, with
// the limits o names for it.
func newStreamConfig(want jetstream.StreamConfig, o ApplyOptions) jetstream.StreamConfig {
	cfg := want
	if d, ok := o.MaxAge[want.Name]; ok {
		cfg.MaxAge = d
	}
	if b, ok := o.MaxBytes[want.Name]; ok {
		cfg.MaxBytes = b
	}
	if d, ok := o.Duplicates[want.Name]; ok {
		cfg.Duplicates = d
	}
	return cfg
}

// streamUpdate is an existing stream's configuration have with rdmawatch's
// subjects and partition transform and the limits o names, and the changes
// that makes; none when all is in place.
func streamUpdate(have, want jetstream.StreamConfig, o ApplyOptions) (jetstream.StreamConfig, []Change) {
	cfg := have
	var these []Change
	set := func(field, from, to string) {
		if from != to {
			these = append(these, Change{Stream: want.Name, Field: field, From: from, To: to})
		}
	}
	if !sameSet(have.Subjects, want.Subjects) {
		set("subjects", fmt.Sprint(have.Subjects), fmt.Sprint(want.Subjects))
		cfg.Subjects = want.Subjects
	}
	if want.SubjectTransform == nil {
		if have.SubjectTransform != nil {
			set("subject_transform", transformString(have.SubjectTransform), "none")
			cfg.SubjectTransform = nil
		}
	} else if tr := wantTransform(have, want, o); have.SubjectTransform == nil || *have.SubjectTransform != tr {
		set("subject_transform", transformString(have.SubjectTransform), transformString(&tr))
		cfg.SubjectTransform = &tr
	}
	if d, ok := o.MaxAge[want.Name]; ok {
		set("max_age", have.MaxAge.String(), d.String())
		cfg.MaxAge = d
	}
	if b, ok := o.MaxBytes[want.Name]; ok {
		set("max_bytes", strconv.FormatInt(have.MaxBytes, 10), strconv.FormatInt(b, 10))
		cfg.MaxBytes = b
	}
	if d, ok := o.Duplicates[want.Name]; ok {
		set("duplicate_window", have.Duplicates.String(), d.String())
		cfg.Duplicates = d
	}
	if o.Replicas > 0 {
		set("num_replicas", strconv.Itoa(have.Replicas), strconv.Itoa(o.Replicas))
		cfg.Replicas = o.Replicas
	}
	return cfg, these
}

// wantTransform is the partition transform an existing stream should have:
// the code's for o.Partitions, or without o.Partitions the stream's own
// count when its transform is valid.
func wantTransform(have, want jetstream.StreamConfig, o ApplyOptions) jetstream.SubjectTransformConfig {
	tr := *want.SubjectTransform
	if o.Partitions == 0 {
		// Keep a valid count; repair a missing or foreign transform
		// with the default.
		if n, err := partitionsOf(have); err == nil {
			tr = *schemas.CountersStream(schemas.StreamOptions{Partitions: n}).SubjectTransform
		}
	}
	return tr
}

func transformString(tr *jetstream.SubjectTransformConfig) string {
	if tr == nil {
		return "none"
	}
	return tr.Source + " -> " + tr.Destination
}

func describe(cfg jetstream.StreamConfig) string {
	s := fmt.Sprintf("subjects %v", cfg.Subjects)
	if cfg.SubjectTransform != nil {
		n, _ := partitionsOf(cfg)
		s += fmt.Sprintf(", %d partitions", n)
	}
	if cfg.MaxAge > 0 {
		s += ", max_age " + cfg.MaxAge.String()
	}
	if cfg.MaxBytes > 0 {
		s += ", max_bytes " + strconv.FormatInt(cfg.MaxBytes, 10)
	}
	return s + fmt.Sprintf(", %s storage, %d replicas", cfg.Storage, cfg.Replicas)
}

// StreamSummary describes a stream as it is, for `rdmawatch streams check`.
func StreamSummary(ctx context.Context, js jetstream.JetStream, name string) (string, error) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", name, err)
	}
	info := st.CachedInfo()
	return fmt.Sprintf("%s: %s; %d messages, %d bytes", name, describe(info.Config), info.State.Msgs, info.State.Bytes), nil
}
