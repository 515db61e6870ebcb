package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

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
}

// Webhook request headers.
const (
	HeaderIdempotencyKey = "Idempotency-Key"      // <incident id>#<revision>
	HeaderEventType      = "Rdmawatch-Event-Type" // pfc_storm, ...
	HeaderEventState     = "Rdmawatch-Event-State"
	HeaderEventRevision  = "Rdmawatch-Event-Revision"
)

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
	return postJSON(ctx, w.client, w.url, body, h)
}
