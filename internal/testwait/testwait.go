// Package testwait polls a condition until it holds or a time limit passes,
// for tests that wait on another goroutine, process or server.
//
// It is for tests only: import it from _test.go files and from nowhere else,
// so that no binary links it; TestOnlyTestsImport fails when a non-test
// file of the module imports it. It lives in a non-test file only so that
// every package's tests can share it.
//
// A wait polls at once, then after 1 ms, and doubles the pause up to 50 ms:
// a condition that holds quickly is seen quickly, and one that takes
// seconds is seen within 50 ms of holding, which the tests that time a
// takeover or a restart rely on. A poll that itself takes longer than the
// pause (queries over a replicated table) is followed by a pause as long
// as it took, so that polling keeps at most half of the time busy on a
// machine the system under test shares. The last poll is at the time
// limit.
package testwait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// For polls ok until it returns nil. After total, or as soon as ok returns
// an error made by Stop, it fails t with what it waited for, how long it
// waited and ok's last error.
func For(t testing.TB, total time.Duration, what string, ok func() error) {
	t.Helper()
	if err := Poll(total, what, ok); err != nil {
		t.Fatal(err)
	}
}

// Until polls ok until it returns true, failing t after total with what it
// waited for and how long.
func Until(t testing.TB, total time.Duration, what string, ok func() bool) {
	t.Helper()
	For(t, total, what, func() error {
		if ok() {
			return nil
		}
		return errNotYet
	})
}

// Poll is For without a test to fail: it returns nil once ok returns nil,
// or an error naming what, the time waited and ok's last error. It is for
// waits whose failure the caller reports with more context, or from
// helpers that return errors.
func Poll(total time.Duration, what string, ok func() error) error {
	start := time.Now()
	deadline := start.Add(total)
	pause := firstPause
	for {
		began := time.Now()
		err := ok()
		if err == nil {
			return nil
		}
		took := time.Since(began)
		waited := time.Since(start).Round(time.Millisecond)
		var s stopped
		if errors.As(err, &s) {
			return fmt.Errorf("gave up after %v waiting for %s: %w", waited, what, s.err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			if errors.Is(err, errNotYet) {
				return fmt.Errorf("timed out after %v waiting for %s", waited, what)
			}
			return fmt.Errorf("timed out after %v waiting for %s: %w", waited, what, err)
		}
		time.Sleep(min(max(pause, took), left))
		pause = min(2*pause, maxPause)
	}
}

// Stop wraps err so that For and Poll give up at once instead of polling
// on: ok returns it when the condition can no longer come true (the
// process that was to log a line exited). A nil err stays nil.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stopped{err}
}

type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }

// errNotYet is Until's condition still being false.
var errNotYet = errors.New("not yet")
