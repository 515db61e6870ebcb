package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func newAlertCmd(g *global) *cobra.Command {
	var (
		cfg        alert.Config
		labels     []string
		secretFile string
	)
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
			cfg.Labels = map[string]string{}
			for _, kv := range labels {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--label %q: want name=value", kv)
				}
				cfg.Labels[k] = v
			}
			if secretFile != "" {
				secret, err := readWebhookSecret(g, secretFile)
				if err != nil {
					return err
				}
				cfg.WebhookSecret = secret
			}
			if err := cfg.Validate(); err != nil {
				return err
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
			tel.RegisterAlert(b.Stats)
			tel.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: telemetry.Namespace, Name: "alert_incidents_refused_total",
				Help: "Incident state changes not held toward Alertmanager because --max-open-incidents incidents were open (each dead-lettered, or skipped in the history read at start).",
			}, func() float64 { return float64(b.Stats().Refused) }))
			g.log.Info("alert bridge started", "alertmanagers", len(cfg.Alertmanagers), "webhooks", len(cfg.Webhooks), "filter", cfg.FilterSubject)
			err = b.Run(cmd.Context())
			g.log.Info("alert bridge stopped", "reason", stopReason(cmd, err))
			return err
		},
	}
	registerAlertFlags(cmd.Flags(), &cfg, &labels, &secretFile)
	return cmd
}

// registerAlertFlags defines the alert bridge's flags. The defaults come
// from the environment and may hold tokens and passwords: --help shows them
// masked (redactDefaults, for every flag).
func registerAlertFlags(f *pflag.FlagSet, cfg *alert.Config, labels *[]string, secretFile *string) {
	f.StringSliceVar(&cfg.Alertmanagers, "alertmanager", splitEnv("RDMAWATCH_ALERTMANAGER"), "Alertmanager as name=URL (or a base URL), repeatable (env RDMAWATCH_ALERTMANAGER, comma separated)")
	f.StringVar(secretFile, "webhook-secret-file", envOr("RDMAWATCH_WEBHOOK_SECRET_FILE", ""), "file holding a secret that signs every webhook request (headers Rdmawatch-Timestamp and Rdmawatch-Signature: sha256= HMAC of timestamp.body) so receivers can refuse anyone else's (env RDMAWATCH_WEBHOOK_SECRET_FILE)")
	f.StringSliceVar(&cfg.Webhooks, "webhook", splitEnv("RDMAWATCH_WEBHOOK"), "webhook as name=URL (or a URL) receiving one JSON POST per incident state change, repeatable (env RDMAWATCH_WEBHOOK)")
	f.StringArrayVar(labels, "label", nil, "extra label name=value on every Alertmanager alert, repeatable (e.g. fabric=pod-a)")
	f.StringVar(&cfg.RunbookURL, "runbook-url", "", "runbook URL template for the runbook_url annotation; {type} is the incident type")
	f.DurationVar(&cfg.ResendInterval, "resend-interval", time.Minute, "how often open incidents are re-sent to Alertmanager (each send holds an alert for 4 intervals)")
	f.IntVar(&cfg.MaxOpen, "max-open-incidents", alert.DefaultMaxOpen, "open incidents held and re-sent to Alertmanager; an event opening one more goes to the dead-letter stream")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", 12, "deliveries of one event to one target before it goes to the dead-letter stream")
	f.DurationVar(&cfg.RetryMin, "retry-min", 500*time.Millisecond, "first wait before re-trying a failed delivery; doubles up to --retry-max, with jitter")
	f.DurationVar(&cfg.RetryMax, "retry-max", time.Minute, "longest wait between delivery attempts (the event is kept in progress meanwhile)")
	f.StringVar(&cfg.FilterSubject, "subject", "", "deliver only events on this subject filter (NATS wildcards; default every event)")
}

func splitEnv(name string) []string {
	v := envOr(name, "")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
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
