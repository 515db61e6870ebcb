package natsutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nats.ErrNoServers, true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{&net.DNSError{Err: "no such host", Name: "nats.svc", IsNotFound: true}, true},
		{nats.ErrAuthorization, false},
		{errors.New("remote error: tls: certificate required"), false},
		{fmt.Errorf("write: %w", syscall.EPIPE), false},
		{&os.PathError{Op: "open", Path: "/x.nk", Err: os.ErrNotExist}, false},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestConnectOptionsInvalid(t *testing.T) {
	for name, o := range map[string]ConnectOptions{
		"cert without key": {URL: "nats://127.0.0.1:1", TLSCert: "c.pem"},
		"key without cert": {URL: "nats://127.0.0.1:1", TLSKey: "k.pem"},
		"missing seed":     {URL: "nats://127.0.0.1:1", NKey: "/nonexistent/user.nk"},
	} {
		if _, err := ConnectWait(context.Background(), o); err == nil {
			t.Errorf("%s: connected", name)
		}
	}
}

// TestConnectWaitRedactsAndGivesUp: the wait logs each attempt without the
// password and ends with the context.
func TestConnectWaitRedactsAndGivesUp(t *testing.T) {
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := ConnectWait(ctx, ConnectOptions{URL: "nats://u:S3cretPw@127.0.0.1:14599", Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if !strings.Contains(buf.String(), "nats not reachable yet") || strings.Contains(buf.String()+err.Error(), "S3cretPw") {
		t.Errorf("log %q, err %v: want the waits logged, never the password", buf.String(), err)
	}
}

// TestConnectWaitBounded: with Wait set, ConnectWait gives up on a server
// that does not answer after that long, with one error naming the URL
// (without its password); without it only the context ends the wait.
func TestConnectWaitBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		ctxFor time.Duration
		want   string
	}{
		{name: "bounded", wait: time.Second, ctxFor: 20 * time.Second, want: "nats nats://u:xxxxx@127.0.0.1:14599 not reachable within 1s: connect to nats"},
		{name: "unbounded", wait: 0, ctxFor: 1500 * time.Millisecond, want: "context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxFor)
			defer cancel()
			began := time.Now()
			_, err := ConnectWait(ctx, ConnectOptions{URL: "nats://u:S3cretPw@127.0.0.1:14599", Wait: tc.wait, Log: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "S3cretPw") {
				t.Fatalf("ConnectWait: %v, want an error with %q", err, tc.want)
			}
			if tc.wait > 0 && time.Since(began) > tc.wait+3*time.Second {
				t.Errorf("gave up after %s, want about %s", time.Since(began), tc.wait)
			}
		})
	}
}
