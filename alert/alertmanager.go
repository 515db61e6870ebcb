package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Alertmanager delivers incidents to an Alertmanager through its v2 API
// (POST /api/v2/alerts). An open incident is sent with an endsAt a few resend
// intervals ahead and re-sent before that passes, so Alertmanager keeps it
// firing exactly as long as rdmawatch keeps it open and resolves it on its own
// if rdmawatch goes away; a resolved incident is sent with its data-time end.
type Alertmanager struct {
	base   string
	client *http.Client
	labels map[string]string // extra labels on every alert (e.g. fabric)
	// runbook is a URL template; "{type}" is replaced with the event type.
	runbook string
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

// Name identifies the target in logs, consumer names and dead letters.
func (a *Alertmanager) Name() string { return "alertmanager " + a.base }

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
	al := postableAlert{Labels: labels, Annotations: ann, StartsAt: ev.Start.Time()}
	if ev.State == schemas.StateResolved && ev.End != nil {
		al.EndsAt = ev.End.Time()
		if al.EndsAt.Before(al.StartsAt) {
			al.EndsAt = al.StartsAt
		}
	} else {
		// Firing until rdmawatch says otherwise or stops re-sending.
		al.EndsAt = now.Add(hold)
	}
	return al
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

// post sends alerts in one request.
func (a *Alertmanager) post(ctx context.Context, alerts []postableAlert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return retry.Permanent(fmt.Errorf("alertmanager payload: %w", err))
	}
	return postJSON(ctx, a.client, strings.TrimRight(a.base, "/")+"/api/v2/alerts", body, nil)
}

// postJSON POSTs body and classifies the answer: 2xx is delivered; 4xx other
// than 408 and 429 will not get better by retrying (permanent); everything
// else (5xx, connection errors, timeouts) is worth another attempt.
func postJSON(ctx context.Context, client *http.Client, url string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(fmt.Errorf("request %s: %w", url, err))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return retry.Permanent(fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg))))
	default:
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
}
