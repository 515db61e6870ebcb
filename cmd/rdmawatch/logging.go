package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/rdmawatch/rdmawatch/internal/redact"
)

// newLogger is the one logger of every role: text for people, JSON (one
// object per line) for log pipelines. Every role names the same things with
// the same attribute keys (node, device, port, stream, subject, err), so a
// log query works across roles. Every message and attribute passes
// through redact (a DSN or URL quoted in an error keeps no password or
// token), whatever part of the code logged it.
func newLogger(w io.Writer, format string, lvl slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: replaceAttr}
	switch format {
	case "text", "":
		return slog.New(redact.Handler(newUniqueHandler(slog.NewTextHandler(w, opts)))), nil
	case "json":
		return slog.New(redact.Handler(newUniqueHandler(slog.NewJSONHandler(w, opts)))), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// replaceAttr writes a duration as Go writes it ("30s", "1m30s") in both
// formats: JSON would otherwise write nanoseconds as an integer, which
// reads like a count and differs from the text logs and the flags.
func replaceAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// uniqueHandler makes a key given again replace the earlier value instead
// of adding a second one: slog's handlers append, so
// log.With("component", "sink") passed to a part that adds
// With("component", "rollup") wrote both keys, which JSON consumers read
// as either one. It keeps the attributes itself and hands the inner handler
// the merged list with each record; a group (WithGroup) starts a new level
// whose keys cannot clash with the ones before it.
type uniqueHandler struct {
	inner slog.Handler
	attrs []slog.Attr // the logger's own, in order, each key once
}

func newUniqueHandler(h slog.Handler) *uniqueHandler { return &uniqueHandler{inner: h} }

func (h *uniqueHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *uniqueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &uniqueHandler{inner: h.inner, attrs: mergeAttrs(h.attrs, as)}
}

func (h *uniqueHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	// The attributes so far belong outside the group: fix them now.
	return &uniqueHandler{inner: h.inner.WithAttrs(h.attrs).WithGroup(name)}
}

func (h *uniqueHandler) Handle(ctx context.Context, r slog.Record) error {
	if len(h.attrs) == 0 {
		return h.inner.Handle(ctx, r)
	}
	rec := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { rec = append(rec, a); return true })
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(mergeAttrs(h.attrs, rec)...)
	return h.inner.Handle(ctx, out)
}

// mergeAttrs is base with add applied: a key already there takes the new
// value in its place, a new key goes last.
func mergeAttrs(base, add []slog.Attr) []slog.Attr {
	out := slices.Clone(base)
	for _, a := range add {
		if i := slices.IndexFunc(out, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 && a.Key != "" {
			out[i] = a
			continue
		}
		out = append(out, a)
	}
	return out
}
