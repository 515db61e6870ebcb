package retry

import (
	"bytes"
	"context"
	"errors"
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
