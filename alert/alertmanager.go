package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Alertmanager delivers incidents to an Alertmanager through its v2 API
// (POST /api/v2/alerts). An open incident is sent with an endsAt a few resend
// intervals ahead and re-sent before that passes, so Alertmanager keeps it
// firing exactly as long as rdmawatch keeps it open and resolves it on its own
// if rdmawatch goes away; a resolved incident is sent with its data-time end
// (never after now: see startsAt and endsAt).
type Alertmanager struct {
	name   string   // the operator's label or the URL's derived name
	base   *url.URL // may carry basic-auth credentials: never printed
	client *http.Client
	labels map[string]string // extra labels on every alert (e.g. fabric)
	// runbook is a URL template; "{type}" is replaced with the event type.
	runbook string
	// maxBatch bounds the alerts of one POST; maxBatchBytes its body.
	maxBatch, maxBatchBytes int
}

// postableAlert is Alertmanager's v2 PostableAlert.
type postableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Labels lists the labels every rdmawatch alert carries (documented in
// docs/alerting.md); device and port only for port scope, node for port and
// node scope.
var Labels = []string{"alertname", "incident", "type", "severity", "layer", "scope", "node", "device", "port", "fabric"}

// AlertName is the alertname of an incident type.
func AlertName(typ string) string { return "rdmawatch_" + typ }

// Name identifies the target in logs, metrics, consumer descriptions and
// dead letters; it never holds the URL's credentials.
func (a *Alertmanager) Name() string { return "alertmanager " + a.name }

// maxAnnotation bounds one annotation value (evidence of a storm over a
// large fabric can be long): Alertmanager keeps every alert in memory and a
// notification shows the first lines anyway, and it bounds the size of one
// alert, so a batch of them stays within maxBatchBytes.
const maxAnnotation = 16 << 10

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func (a *Alertmanager) alert(ev *schemas.Event, now time.Time, hold time.Duration) postableAlert {
	labels := map[string]string{
		"alertname": AlertName(ev.Type),
		"incident":  ev.ID,
		"type":      ev.Type,
		"severity":  ev.Severity,
		"layer":     ev.Layer,
		"scope":     ev.Scope,
	}
	if ev.Subject.Node != "" {
		labels["node"] = ev.Subject.Node
	}
	if ev.Subject.Device != "" {
		labels["device"] = ev.Subject.Device
		labels["port"] = strconv.Itoa(ev.Subject.Port)
	}
	for k, v := range a.labels {
		if _, set := labels[k]; !set && v != "" {
			labels[k] = v
		}
	}
	ann := map[string]string{"summary": ev.Summary}
	if len(ev.Evidence) > 0 {
		ann["evidence"] = evidenceText(ev.Evidence)
	}
	if len(ev.Checks) > 0 {
		lines := make([]string, len(ev.Checks))
		for i, c := range ev.Checks {
			lines[i] = c.Command
			if c.Note != "" {
				lines[i] += "  # " + c.Note
			}
		}
		ann["next_checks"] = strings.Join(lines, "\n")
	} else if len(ev.NextChecks) > 0 {
		ann["next_checks"] = strings.Join(ev.NextChecks, "\n")
	}
	if a.runbook != "" {
		ann["runbook_url"] = strings.ReplaceAll(a.runbook, "{type}", ev.Type)
	}
	for k, v := range ann {
		ann[k] = truncate(v, maxAnnotation)
	}
	return postableAlert{Labels: labels, Annotations: ann, StartsAt: startsAt(ev, now), EndsAt: endsAt(ev, now, hold)}
}

// startsAt is the incident's onset, but never after now: data time runs
// ahead of the clock when a simulator runs faster than real time or a
// host's clock is fast, and Alertmanager refuses (400 "start time must be
// before end time") an alert that starts after it ends, which for a firing
// alert is now + hold.
func startsAt(ev *schemas.Event, now time.Time) time.Time {
	s := ev.Start.Time()
	if s.After(now) {
		return now
	}
	return s
}

// endsAt is when Alertmanager stops firing the alert: for an open incident
// a hold ahead of now, renewed by every re-send, so it fires as long as
// rdmawatch keeps it open; for a resolved one its data-time end, but never
// after now (an end in the future would keep a resolved incident firing
// until then) nor before startsAt.
func endsAt(ev *schemas.Event, now time.Time, hold time.Duration) time.Time {
	if ev.State != schemas.StateResolved || ev.End == nil {
		return now.Add(hold)
	}
	e := ev.End.Time()
	if e.After(now) {
		e = now
	}
	if s := startsAt(ev, now); e.Before(s) {
		e = s
	}
	return e
}

// evidenceText renders evidence as "key=value" pairs in key order, one line,
// so it reads in a notification and diffs stably.
func evidenceText(ev map[string]any) string {
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		v, err := json.Marshal(ev[k])
		if err != nil {
			v = []byte(fmt.Sprint(ev[k]))
		}
		b.WriteString(k + "=" + string(v))
	}
	return b.String()
}

// post sends alerts in as many requests as their bounds need (maxBatch
// alerts, maxBatchBytes of body, an alert too large alone in one), so the
// re-send of many open incidents is a series of bounded POSTs, not one
// that grows with them. It tries every batch and returns their errors.
func (a *Alertmanager) post(ctx context.Context, alerts []postableAlert) error {
	maxN, maxBytes := a.maxBatch, a.maxBatchBytes
	if maxN <= 0 {
		maxN = defaultBatch
	}
	if maxBytes <= 0 {
		maxBytes = defaultBatchBytes
	}
	target := a.base.JoinPath("api", "v2", "alerts").String()
	var (
		errs  []error
		batch bytes.Buffer
		n     int
	)
	flush := func() {
		if n == 0 {
			return
		}
		batch.WriteByte(']')
		if err := postJSON(ctx, a.client, target, batch.Bytes(), nil); err != nil {
			errs = append(errs, err)
		}
		batch.Reset()
		n = 0
	}
	for i := range alerts {
		one, err := json.Marshal(alerts[i])
		if err != nil {
			errs = append(errs, retry.Permanent(fmt.Errorf("alertmanager payload: %w", err)))
			continue
		}
		if n > 0 && (n >= maxN || batch.Len()+1+len(one)+1 > maxBytes) {
			flush()
		}
		if n == 0 {
			batch.WriteByte('[')
		} else {
			batch.WriteByte(',')
		}
		batch.Write(one)
		n++
	}
	flush()
	return errors.Join(errs...)
}

// postJSON POSTs body and classifies the answer: 2xx is delivered; 4xx other
// than 408 and 429 will not get better by retrying (permanent); everything
// else (5xx, connection errors, timeouts) is worth another attempt. Errors
// do not name the URL, which may carry a secret: the caller names the
// target.
func postJSON(ctx context.Context, client *http.Client, target string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(errors.New("POST: the target URL does not make a request"))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error quotes the URL; what went wrong is inside it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST: %w", redact.Error(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	answer := strings.ToValidUTF8(strings.TrimSpace(string(msg)), "?")
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return retry.Permanent(fmt.Errorf("POST: %s: %s", resp.Status, answer))
	default:
		return fmt.Errorf("POST: %s: %s", resp.Status, answer)
	}
}
