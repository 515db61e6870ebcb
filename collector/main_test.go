package collector

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The namespace test re-executes this binary; its inner run must not
	// trip over goroutines of the outer one, and both check for leaks.
	goleak.VerifyTestMain(m)
}
