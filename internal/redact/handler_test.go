package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

type stringer string

func (s stringer) String() string { return string(s) }

// TestHandler: whatever carries a URL (message, string, error, Stringer,
// group, With, a list), in text and JSON, the secret is not written and the
// rest is.
func TestHandler(t *testing.T) {
	const secret = "AbCdEf0123456789GhIjKlMn"
	hook := "https://hooks.example/services/T0/B0/" + secret
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"message", func(l *slog.Logger) { l.Info("posting to " + hook) }},
		{"string", func(l *slog.Logger) { l.Info("m", "url", hook) }},
		{"error", func(l *slog.Logger) {
			l.Warn("m", "err", &url.Error{Op: "Post", URL: hook, Err: errors.New("refused")})
		}},
		{"stringer", func(l *slog.Logger) { l.Info("m", "u", stringer(hook)) }},
		{"group", func(l *slog.Logger) { l.Info("m", slog.Group("target", "url", hook)) }},
		{"with", func(l *slog.Logger) { l.With("url", hook).Info("m") }},
		{"with group", func(l *slog.Logger) { l.WithGroup("g").Info("m", "url", hook) }},
		{"list", func(l *slog.Logger) { l.Info("m", "urls", []string{hook, "http://u:" + secret + "@h"}) }},
		{"debug", func(l *slog.Logger) { l.Debug("m", "url", "https://h/x?token="+secret) }},
	} {
		for _, format := range []string{"text", "json"} {
			var buf bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var h slog.Handler = slog.NewTextHandler(&buf, opts)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, opts)
			}
			tc.log(slog.New(Handler(h)))
			out := buf.String()
			if strings.Contains(out, secret) || !strings.Contains(out, Mask) {
				t.Errorf("%s (%s): %s", tc.name, format, out)
			}
		}
	}
	// Values that hold no URL are written as they are.
	var buf bytes.Buffer
	slog.New(Handler(slog.NewTextHandler(&buf, nil))).Info("delivered", "attempts", 3, "target", "webhook oncall", "err", fmt.Errorf("503"))
	if got := buf.String(); !strings.Contains(got, `msg=delivered attempts=3 target="webhook oncall" err=503`) {
		t.Errorf("plain record changed: %s", got)
	}
}
