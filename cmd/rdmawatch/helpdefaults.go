package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rdmawatch/rdmawatch/internal/redact"
)

// redactDefaults masks the secrets in every flag's shown default, on c and
// every command under it. Many flags take their default from an
// RDMAWATCH_* variable (--nats, --clickhouse, the alert targets), and
// --help prints the default: a DSN's password or a webhook's token would
// be printed to whoever runs --help in that environment. The value itself
// is untouched; only the text help shows is.
func redactDefaults(c *cobra.Command) {
	mask := func(f *pflag.Flag) { f.DefValue = redact.String(f.DefValue) }
	c.Flags().VisitAll(mask)
	c.PersistentFlags().VisitAll(mask)
	for _, sub := range c.Commands() {
		redactDefaults(sub)
	}
}
