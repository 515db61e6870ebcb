package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	errDown := errors.New("connection refused")
	errAuth := errors.New("authorization violation")
	tests := []struct {
		name      string
		failures  int   // attempts that fail before success
		permanent error // returned on the first attempt instead
		timeout   time.Duration
		wantErr   error
		wantCalls int
		wantLog   []string
	}{
		{name: "first try", wantCalls: 1},
		{name: "after failures", failures: 3, wantCalls: 4, wantLog: []string{"not reachable yet", "attempt=3", "reachable"}},
		{name: "permanent", permanent: errAuth, wantErr: errAuth, wantCalls: 1},
		{name: "context ends", failures: 1 << 30, timeout: 50 * time.Millisecond, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			calls := 0
			got, err := Do(ctx, log, "svc", Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond}, func(context.Context) (int, error) {
				calls++
				if tt.permanent != nil {
					return 0, Permanent(tt.permanent)
				}
				if calls <= tt.failures {
					return 0, errDown
				}
				return 42, nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && got != 42 {
				t.Errorf("value = %d, want 42", got)
			}
			if tt.wantCalls > 0 && calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			for _, w := range tt.wantLog {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, buf.String())
				}
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name   string
		p      Policy
		lo, hi time.Duration // the first wait is lo; every wait within [lo, hi]
		spread bool          // the waits at the cap differ (jitter)
	}{
		{name: "defaults", lo: defaultInitial, hi: defaultMax, spread: true},
		{name: "bounds", p: Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second},
			lo: 100 * time.Millisecond, hi: 2 * time.Second, spread: true},
		{name: "equal bounds", p: Policy{Initial: time.Second, Max: time.Second}, lo: time.Second, hi: time.Second},
		{name: "max below initial", p: Policy{Initial: time.Second, Max: time.Millisecond}, lo: time.Second, hi: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			atCap := map[time.Duration]bool{}
			for range 20 {
				b := NewBackoff(tt.p)
				if first := b.Next(); first != tt.lo {
					t.Fatalf("first wait %s, want %s", first, tt.lo)
				}
				var d time.Duration
				for i := range 70 {
					if d = b.Next(); d < tt.lo || d > tt.hi {
						t.Fatalf("wait %s outside [%s, %s]", d, tt.lo, tt.hi)
					}
					if i > 60 {
						atCap[d] = true
					}
				}
				if floor := time.Duration(float64(tt.hi) * (1 - jitter)); d < floor {
					t.Fatalf("after 70 waits %s, want at least %s", d, floor)
				}
				b.Reset()
				if again := b.Next(); again != tt.lo {
					t.Fatalf("after Reset %s, want %s", again, tt.lo)
				}
			}
			if tt.spread && len(atCap) < 10 {
				t.Errorf("only %d different waits at the cap: no jitter", len(atCap))
			}
		})
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel: %v, want context.Canceled", err)
	}
	if waited := time.Since(start); waited > time.Minute {
		t.Fatalf("Sleep after cancel waited %s", waited)
	}
}

func TestIsPermanent(t *testing.T) {
	base := errors.New("401 unauthorized")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"permanent", Permanent(base), true},
		{"wrapped permanent", fmt.Errorf("post: %w", Permanent(base)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	if !errors.Is(Permanent(base), base) {
		t.Error("Permanent hides the error it marks from errors.Is")
	}
}
