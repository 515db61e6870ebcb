package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// alertFlags are the alert command's settings.
type alertFlags struct {
	cfg        alert.Config
	labels     []string
	secretFile string
}

// labelMap reads --label name=value pairs.
func (o *alertFlags) labelMap() (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range o.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want name=value", kv)
		}
		m[k] = v
	}
	return m, nil
}

// validate checks the bridge's settings by flag, then as alert.New will
// (the targets, the label names). The secret file is read at the start.
func (o *alertFlags) validate() error {
	c := o.cfg
	switch {
	case c.ResendInterval <= 0:
		return fmt.Errorf("--resend-interval %s: want a positive duration such as 1m", c.ResendInterval)
	case c.MaxOpen < 0:
		return fmt.Errorf("--max-open-incidents %d: want 0 (the default, %d) or more", c.MaxOpen, alert.DefaultMaxOpen)
	case c.MaxAttempts < 0:
		return fmt.Errorf("--max-attempts %d: want 0 (the default) or more", c.MaxAttempts)
	case c.RetryMin < 0:
		return fmt.Errorf("--retry-min %s: want 0 (the default) or more", c.RetryMin)
	case c.RetryMax < 0:
		return fmt.Errorf("--retry-max %s: want 0 (the default) or more", c.RetryMax)
	case c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax:
		return fmt.Errorf("--retry-min %s is above --retry-max %s", c.RetryMin, c.RetryMax)
	}
	var err error
	if c.Labels, err = o.labelMap(); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("--alertmanager, --webhook, --label: %w", err)
	}
	return nil
}

func newAlertCmd(g *global) *cobra.Command {
	var o alertFlags
	cmd := &cobra.Command{
		Use:   "alert",
		Short: "Deliver incidents to Alertmanager and webhooks",
		Long: `alert follows the events stream with one durable consumer per target and
delivers every incident state change in order: to Alertmanager's v2 API (open and
update fire, resolved ends the alert; open incidents are re-sent every
--resend-interval so Alertmanager keeps them firing) and to webhooks (one JSON
POST per change, the same JSON as replay --events-out, with an Idempotency-Key
header). An event is acknowledged only after the target accepted it; one a
target refuses (4xx), one that cannot be sent (a control character in its
type), an incident beyond --max-open-incidents, or one that fails
--max-attempts times goes to the dead-letter stream with the reason.

Give each target a name: --webhook oncall=https://hooks.example/T0/B0/SECRET
or --alertmanager am-1=http://user:password@alertmanager:9093. Logs, metrics,
dead letters and the durable consumer show and use the name, never the URL, so
a rotated token or password keeps the consumer. A bare URL is named by its
scheme, host and path with every secret masked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAlert(cmd, g, o)
		},
	}
	registerAlertFlags(cmd.Flags(), &o)
	g.validates(cmd, &o)
	return cmd
}

// runAlert runs the bridge on settings validate checked.
func runAlert(cmd *cobra.Command, g *global, o alertFlags) error {
	cfg := o.cfg
	cfg.Labels, _ = o.labelMap() // validate read them
	if o.secretFile != "" {
		secret, err := readWebhookSecret(g, o.secretFile)
		if err != nil {
			return err
		}
		cfg.WebhookSecret = secret
	}
	tel, err := serveTelemetry(cmd, g, "alert")
	if err != nil {
		return err
	}
	nc, js, err := connectJS(cmd, g, "rdmawatch-alert", schemas.StreamEvents, schemas.StreamDeadLetter)
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := alert.New(js, cfg, g.log)
	if err != nil {
		return err
	}
	tel.WatchNATS(nc)
	registerAlertMetrics(tel.Registry(), b.Stats)
	g.log.Info("alert bridge started", "alertmanagers", len(cfg.Alertmanagers), "webhooks", len(cfg.Webhooks), "filter", cfg.FilterSubject)
	err = b.Run(cmd.Context())
	g.log.Info("alert bridge stopped", "reason", stopReason(cmd, err))
	return err
}

// registerAlertFlags defines the alert bridge's flags. A target URL may
// hold a token or a password: it comes from the command line, the
// environment or the file, never from a default that --help would print.
func registerAlertFlags(f *pflag.FlagSet, o *alertFlags) {
	cfg := &o.cfg
	f.StringSliceVar(&cfg.Alertmanagers, "alertmanager", nil, "Alertmanager as name=URL (or a base URL), repeatable; in the environment or the file, comma separated")
	f.StringVar(&o.secretFile, "webhook-secret-file", "", "file holding a secret that signs every webhook request (headers Rdmawatch-Timestamp and Rdmawatch-Signature: sha256= HMAC of timestamp.body) so receivers can refuse anyone else's")
	f.StringSliceVar(&cfg.Webhooks, "webhook", nil, "webhook as name=URL (or a URL) receiving one JSON POST per incident state change, repeatable; in the environment or the file, comma separated")
	f.StringArrayVar(&o.labels, "label", nil, "extra label name=value on every Alertmanager alert, repeatable (e.g. fabric=pod-a)")
	f.StringVar(&cfg.RunbookURL, "runbook-url", "", "runbook URL template for the runbook_url annotation; {type} is the incident type")
	f.DurationVar(&cfg.ResendInterval, "resend-interval", time.Minute, "how often open incidents are re-sent to Alertmanager (each send holds an alert for 4 intervals)")
	f.IntVar(&cfg.MaxOpen, "max-open-incidents", alert.DefaultMaxOpen, "open incidents held and re-sent to Alertmanager; an event opening one more goes to the dead-letter stream")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", 12, "deliveries of one event to one target before it goes to the dead-letter stream")
	f.DurationVar(&cfg.RetryMin, "retry-min", 500*time.Millisecond, "first wait before re-trying a failed delivery; doubles up to --retry-max, with jitter")
	f.DurationVar(&cfg.RetryMax, "retry-max", time.Minute, "longest wait between delivery attempts (the event is kept in progress meanwhile)")
	f.StringVar(&cfg.FilterSubject, "subject", "", "deliver only events on this subject filter (NATS wildcards; default every event)")
}

// readWebhookSecret reads the signing secret: the file's content without
// surrounding white space, at least 16 bytes (a short secret can be
// guessed from signed requests). A file readable by group or others is
// warned about, as a NATS seed is.
func readWebhookSecret(g *global, path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--webhook-secret-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		g.log.Warn("webhook secret file is accessible by group or others; chmod 600 it", "file", path, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--webhook-secret-file: %w", err)
	}
	secret := bytes.TrimSpace(b)
	if len(secret) < 16 {
		return nil, fmt.Errorf("--webhook-secret-file %s: %d bytes of secret, want at least 16", path, len(secret))
	}
	return secret, nil
}
