package main

import (
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/telemetry"
)

// serveTelemetry starts a role's /metrics, /healthz and /readyz on --listen
// before the role connects anywhere: a role waiting for NATS or ClickHouse
// is alive and says why it is not ready.
func serveTelemetry(cmd *cobra.Command, g *global, role string) (*telemetry.Server, error) {
	s := telemetry.New(role, version, g.log)
	if _, err := s.Serve(cmd.Context(), g.listen); err != nil {
		return nil, err
	}
	return s, nil
}
