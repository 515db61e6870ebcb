package alert

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Webhook POSTs every incident state change as the same JSON object that
// `replay --events-out` writes, one request per change. Headers carry what a
// receiver needs to be idempotent without parsing the body: a delivery that
// rdmawatch repeats (it crashed after the POST, before its ack) has the same
// Idempotency-Key.
type Webhook struct {
	name   string // the operator's label or the URL's derived name
	url    string // may carry a token: never printed
	client *http.Client
	// secret signs every request (HeaderSignature) when set.
	secret []byte
	now    func() time.Time
}

// Webhook request headers.
const (
	HeaderIdempotencyKey = "Idempotency-Key"      // <incident id>#<revision>
	HeaderEventType      = "Rdmawatch-Event-Type" // pfc_storm, ...
	HeaderEventState     = "Rdmawatch-Event-State"
	HeaderEventRevision  = "Rdmawatch-Event-Revision"
	// HeaderTimestamp and HeaderSignature authenticate a request when the
	// bridge has a webhook secret (Config.WebhookSecret): the signature is
	// "sha256=" and the hex HMAC-SHA256, under the secret, of the
	// timestamp (unix seconds, as sent), a ".", and the body. A receiver
	// recomputes it, compares in constant time and refuses a timestamp
	// older than its tolerance (five minutes is usual): a captured request
	// cannot be replayed later, nor its body altered. The scheme is
	// Stripe's and Slack's; the secret never travels.
	HeaderTimestamp = "Rdmawatch-Timestamp"
	HeaderSignature = "Rdmawatch-Signature"
)

// Sign is the HeaderSignature value of body sent at unix time ts under
// secret; receivers may call it to check a request.
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Name identifies the target in logs, metrics, consumer descriptions and
// dead letters; it never holds the URL's secrets.
func (w *Webhook) Name() string { return "webhook " + w.name }

func (w *Webhook) deliver(ctx context.Context, ev *schemas.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return retry.Permanent(fmt.Errorf("event %s as JSON: %w", ev.MsgID(), err))
	}
	h := http.Header{}
	h.Set(HeaderIdempotencyKey, ev.MsgID())
	h.Set(HeaderEventType, ev.Type)
	h.Set(HeaderEventState, ev.State)
	h.Set(HeaderEventRevision, strconv.Itoa(ev.Revision))
	if len(w.secret) > 0 {
		now := time.Now
		if w.now != nil {
			now = w.now
		}
		ts := now().Unix()
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, Sign(w.secret, ts, body))
	}
	return postJSON(ctx, w.client, w.url, body, h)
}
