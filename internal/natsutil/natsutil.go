// Package natsutil starts the embedded NATS JetStream server and creates the
// streams rdmawatch uses; cmd/ and the tests share it.
package natsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ConnectOptions are the client settings shared by every subcommand. Every
// credential is a path to a file, so no secret appears on a command line.
type ConnectOptions struct {
	URL   string // one URL or a comma-separated list
	Creds string // .creds file (JWT and nkey seed), optional
	NKey  string // nkey seed file (an "SU..." user seed), optional
	// TLS: TLSCA verifies the server with a private CA; TLSCert and TLSKey
	// are the client certificate a server with verify: true asks for.
	TLSCA, TLSCert, TLSKey string
	Name                   string
	// InboxPrefix is where the connection's replies arrive (InboxPrefix
	// of the role); empty keeps nats.go's _INBOX, which the shipped users
	// may not subscribe to.
	InboxPrefix string
	// Log receives connection state changes (disconnect WARN, reconnect
	// INFO with the outage's length, async errors); nil logs to
	// slog.Default().
	Log *slog.Logger
	// Wait bounds how long ConnectWait waits for a server that does not
	// answer: a one-shot command gives up and says so; 0 waits as long as
	// the context lasts (a role, which systemd or Kubernetes would only
	// restart into the same wait).
	Wait time.Duration
}

func (o ConnectOptions) natsOptions() ([]nats.Option, error) {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
	}
	if o.Creds != "" {
		warnSecretReadable(log, "nats credentials", o.Creds)
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.NKey != "" {
		warnSecretReadable(log, "nats nkey seed", o.NKey)
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed %s: %w", o.NKey, err)
		}
		opts = append(opts, opt)
	}
	if o.InboxPrefix != "" {
		if err := checkInboxPrefix(o.InboxPrefix); err != nil {
			return nil, err
		}
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("nats tls: a client certificate needs both the certificate and the key file")
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	opts = append(opts, outageLogging(log)...)
	return opts, nil
}

// secretWarned holds the secret files already warned about: a role
// retrying its first connection must not repeat the warning every attempt.
var secretWarned sync.Map

// warnSecretReadable warns, once per file, when a file holding a private
// key is readable or writable by group or others: the seed is the user's
// identity, as an ssh private key is (ssh refuses such a key; a collector
// on every node of a fleet only warns, so a permissions slip does not stop
// the fleet's monitoring).
func warnSecretReadable(log *slog.Logger, what, path string) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return // an unreadable file fails at connect, with its own error
	}
	if _, done := secretWarned.LoadOrStore(path, true); done {
		return
	}
	log.Warn(what+" file is accessible by group or others; chmod 600 it", "file", path, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
}

// outageLogging makes broker outages visible: a WARN when the connection
// drops, a WARN every stillDownEvery while it stays down, an INFO with the
// outage's length when it is back, and every async error (permissions
// violations, slow consumers) at ERROR.
func outageLogging(log *slog.Logger) []nats.Option {
	var (
		mu       sync.Mutex
		downAt   time.Time
		lastWarn time.Time
	)
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			mu.Lock()
			downAt, lastWarn = time.Now(), time.Now()
			mu.Unlock()
			if nc.IsClosed() {
				return
			}
			log.Warn("nats disconnected, reconnecting", "server", redact.String(nc.ConnectedUrlRedacted()), "err", redact.Error(err))
		}),
		nats.ReconnectErrHandler(func(nc *nats.Conn, err error) {
			mu.Lock()
			defer mu.Unlock()
			if downAt.IsZero() || time.Since(lastWarn) < stillDownEvery {
				return
			}
			lastWarn = time.Now()
			log.Warn("nats still disconnected", "down_for", time.Since(downAt).Round(time.Second), "err", redact.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			mu.Lock()
			outage := time.Since(downAt)
			downAt = time.Time{}
			mu.Unlock()
			log.Info("nats reconnected", "server", redact.String(nc.ConnectedUrlRedacted()), "outage", outage.Round(time.Millisecond))
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", redact.Error(err)}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			log.Error("nats async error", attrs...)
		}),
	}
}

// stillDownEvery spaces the reminders of a long outage.
const stillDownEvery = 30 * time.Second

// Connect dials NATS once, with reconnects that never give up afterwards:
// a collector must outlive a broker restart. Errors name the URL without
// its credentials.
func Connect(o ConnectOptions) (*nats.Conn, error) {
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redact.String(o.URL), redact.Error(err))
	}
	return nc, nil
}

// ConnectWait is Connect for a role starting next to its broker: while the
// server does not answer it retries with backoff and jitter, logging each
// wait, until it connects or ctx ends. Refused credentials and bad options
// are not retried.
func ConnectWait(ctx context.Context, o ConnectOptions) (*nats.Conn, error) {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	permanent := false
	nc, err := retry.Do(ctx, log, "nats", retry.Policy{MaxElapsed: o.Wait}, func(context.Context) (*nats.Conn, error) {
		nc, err := Connect(o)
		if err != nil && !transient(err) {
			permanent = true
			return nil, retry.Permanent(err)
		}
		return nc, err
	})
	if err != nil && o.Wait > 0 && !permanent && ctx.Err() == nil {
		return nil, fmt.Errorf("nats %s not reachable within %s: %w", redact.String(o.URL), o.Wait, err)
	}
	return nc, err
}

// transient reports whether a failed first connection may succeed later:
// nobody answers yet (refused, unreachable, timed out, a name that does not
// resolve yet). A server that answers and refuses us (credentials, TLS)
// will refuse again: that ends the wait.
func transient(err error) bool {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.As(err, &dnsErr):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	return false
}

// EnsureStreams creates or updates the rdmawatch streams to exactly the
// code's configuration. It is for the in-process jobs (replay, run, tests)
// that own their embedded server; a fleet's streams belong to
// `rdmawatch streams apply` (ApplyStreams), and roles only CheckStreams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, o schemas.StreamOptions) error {
	for _, cfg := range schemas.Streams(o) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
