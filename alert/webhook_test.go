package alert

import (
	"context"
	"crypto/hmac"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestWebhookSignature: with a secret every request carries a timestamp
// and an HMAC of timestamp.body a receiver can recompute; a changed body or
// timestamp does not verify; without a secret neither header is sent.
func TestWebhookSignature(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ev := &schemas.Event{ID: "link_flap/gpu-001/mlx5_0/1/1", Type: schemas.TypeLinkFlap, State: schemas.StateOpen}
	for _, tc := range []struct {
		name   string
		secret []byte
	}{
		{"signed", []byte("0123456789abcdef-webhook")},
		{"unsigned", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got http.Header
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
				body, _ = io.ReadAll(r.Body)
			}))
			defer srv.Close()
			w := &Webhook{name: "test", url: srv.URL, client: srv.Client(), secret: tc.secret, now: func() time.Time { return at }}
			if err := w.deliver(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			sig, ts := got.Get(HeaderSignature), got.Get(HeaderTimestamp)
			if tc.secret == nil {
				if sig != "" || ts != "" {
					t.Errorf("unsigned webhook sent %s=%q %s=%q", HeaderSignature, sig, HeaderTimestamp, ts)
				}
				return
			}
			sec, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || sec != at.Unix() {
				t.Fatalf("%s %q, want %d", HeaderTimestamp, ts, at.Unix())
			}
			if !hmac.Equal([]byte(sig), []byte(Sign(tc.secret, sec, body))) {
				t.Errorf("signature %q does not verify", sig)
			}
			if hmac.Equal([]byte(sig), []byte(Sign(tc.secret, sec+1, body))) ||
				hmac.Equal([]byte(sig), []byte(Sign(tc.secret, sec, append(body, ' ')))) ||
				hmac.Equal([]byte(sig), []byte(Sign([]byte("another secret of 24 b"), sec, body))) {
				t.Error("the signature verifies with another timestamp, body or secret")
			}
		})
	}
}
