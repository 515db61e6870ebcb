package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger is the one logger of every role: text for people, JSON (one
// object per line) for log pipelines. Every role names the same things with
// the same attribute keys (node, device, port, stream, subject, err), so a
// log query works across roles.
func newLogger(w io.Writer, format string, lvl slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
