package testwait

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records what For and Until fail with. Its Fatal ends the calling
// goroutine the way testing's does, so the wait is run in a goroutine of
// its own.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls wait with a fakeTB and returns what it failed with ("" when it
// returned).
func run(wait func(testing.TB)) string {
	f := &fakeTB{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait(f)
	}()
	wg.Wait()
	return f.failed
}

func TestFor(t *testing.T) {
	t.Parallel()
	notThere := errors.New("the rows are not there")
	// after returns notThere until the n-th poll, then last.
	after := func(n int, last error) func(int) error {
		return func(call int) error {
			if call < n {
				return notThere
			}
			return last
		}
	}
	for _, tc := range []struct {
		name      string
		ok        func(call int) error
		total     time.Duration
		wantCalls func(int) bool
		wantFail  []string // substrings of the failure; nil: none
		minTook   time.Duration
	}{
		{name: "holds at once", ok: after(1, nil), total: time.Second,
			wantCalls: func(n int) bool { return n == 1 }},
		{name: "holds at the fourth poll", ok: after(4, nil), total: 5 * time.Second,
			wantCalls: func(n int) bool { return n == 4 }},
		{name: "never holds", ok: after(1, notThere), total: 200 * time.Millisecond,
			wantCalls: func(n int) bool { return n >= 5 },
			wantFail:  []string{"timed out after ", "waiting for the sink's rows", "the rows are not there"},
			minTook:   200 * time.Millisecond},
		{name: "stopped at once", ok: after(1, Stop(notThere)), total: 10 * time.Second,
			wantCalls: func(n int) bool { return n == 1 },
			wantFail:  []string{"gave up after ", "waiting for the sink's rows", "the rows are not there"}},
		{name: "stopped after polls", ok: after(3, Stop(errors.New("the sink exited"))), total: 10 * time.Second,
			wantCalls: func(n int) bool { return n == 3 },
			wantFail:  []string{"gave up after ", "the sink exited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			began := time.Now()
			failed := run(func(tb testing.TB) {
				For(tb, tc.total, "the sink's rows", func() error {
					calls++
					return tc.ok(calls)
				})
			})
			took := time.Since(began)
			if !tc.wantCalls(calls) {
				t.Errorf("ok called %d times", calls)
			}
			if tc.wantFail == nil && failed != "" {
				t.Errorf("failed with %q, want no failure", failed)
			}
			if tc.wantFail != nil && failed == "" {
				t.Errorf("no failure, want one saying %q", tc.wantFail)
			}
			for _, want := range tc.wantFail {
				if !strings.Contains(failed, want) {
					t.Errorf("failure %q does not say %q", failed, want)
				}
			}
			if took < tc.minTook {
				t.Errorf("gave up after %v, before the %v it was given", took, tc.minTook)
			}
			if tc.minTook == 0 && took > time.Second {
				t.Errorf("took %v, want it done well before the time limit", took)
			}
		})
	}
}

func TestUntil(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		holdsAt  int // 0: never
		wantFail string
	}{
		{"holds at once", 1, ""},
		{"holds later", 3, ""},
		{"never holds", 0, "waiting for alertmanager ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			failed := run(func(tb testing.TB) {
				Until(tb, 100*time.Millisecond, "alertmanager ready", func() bool {
					calls++
					return calls == tc.holdsAt
				})
			})
			if (failed == "") != (tc.wantFail == "") || !strings.Contains(failed, tc.wantFail) {
				t.Errorf("failed with %q, want %q", failed, tc.wantFail)
			}
			if strings.Contains(failed, "not yet") {
				t.Errorf("failure %q carries the internal error; a false condition has none", failed)
			}
		})
	}
}

// The pause between polls stays short: a condition that comes true while
// the wait is long under way is seen within the pause's ceiling.
func TestPollSeesLateConditionQuickly(t *testing.T) {
	t.Parallel()
	began := time.Now()
	holds := began.Add(300 * time.Millisecond)
	if err := Poll(5*time.Second, "the clock", func() error {
		if time.Now().Before(holds) {
			return errors.New("too early")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The ceiling plus room for a loaded machine.
	if late := time.Since(holds); late > maxPause+100*time.Millisecond {
		t.Errorf("the condition held %v before the wait saw it, want at most about %v", late, maxPause)
	}
}

// A slow check is followed by a pause as long as it took: polling keeps at
// most about half of the time busy. Polls of 200 ms over 2 s are then about
// six (one each 400 ms, and the last at the time limit), where the 50 ms
// pauses alone would make nine.
func TestPollPausesAfterASlowCheck(t *testing.T) {
	t.Parallel()
	calls := 0
	err := Poll(2*time.Second, "a slow check", func() error {
		calls++
		time.Sleep(200 * time.Millisecond)
		return errors.New("not yet there")
	})
	if err == nil {
		t.Fatal("a check that never holds: Poll returned nil")
	}
	if calls > 7 {
		t.Errorf("%d polls of 200 ms in 2 s, want at most 7: the pauses are shorter than the polls", calls)
	}
}

func TestStopNil(t *testing.T) {
	t.Parallel()
	if err := Stop(nil); err != nil {
		t.Errorf("Stop(nil) = %v, want nil", err)
	}
	err := Stop(os.ErrNotExist)
	if !errors.Is(err, os.ErrNotExist) || err.Error() != os.ErrNotExist.Error() {
		t.Errorf("Stop(%v) = %v: want the same error, wrapped", os.ErrNotExist, err)
	}
}

// TestOnlyTestsImport walks the module and fails when a non-test Go file
// imports this package: a binary must not link test code. Every .go file
// is read, whatever its build constraints.
func TestOnlyTestsImport(t *testing.T) {
	t.Parallel()
	root, module := moduleRoot(t)
	self := module + "/internal/testwait"
	fset := token.NewFileSet()
	var bad []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			// What the go tool ignores, and other modules.
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				rel, _ := filepath.Rel(root, path)
				bad = append(bad, fmt.Sprintf("%s:%d", rel, fset.Position(imp.Pos()).Line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module at %s: %v", root, err)
	}
	if files < 10 {
		t.Fatalf("found %d non-test Go files under %s: not the module's root", files, root)
	}
	if len(bad) > 0 {
		t.Errorf("%s is for tests only, but non-test files import it:\n%s", self, strings.Join(bad, "\n"))
	}
}

// moduleRoot is the directory of the go.mod above this package, and the
// module path it declares.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			t.Fatalf("%s: no module line", f.Name())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}
