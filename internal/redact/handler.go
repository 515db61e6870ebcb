package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that every record's message and attribute values
// (strings, errors, Stringers, and those inside groups) pass through String
// before h writes them: a part that logs URLs or errors quoting them cannot
// print a secret by forgetting to redact one call.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(*handler); ok {
		return h
	}
	return &handler{inner: h}
}

type handler struct{ inner slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = attr(a)
	}
	return &handler{inner: h.inner.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name)}
}

// attr redacts one attribute's value; numbers, times and durations cannot
// hold a URL and pass as they are.
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.Any(a.Key, Error(x))
		case fmt.Stringer:
			return slog.String(a.Key, String(x.String()))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = String(s)
			}
			return slog.Any(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
