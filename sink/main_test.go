package sink_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The sink starts a goroutine per stream, and the tests start NATS servers,
// clients and ClickHouse connections: all must be gone when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
