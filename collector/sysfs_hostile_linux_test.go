package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
)

// sysfsHostileTree builds one mlx5 RoCE device with one port below
// <root>/class and returns root and the port directory.
func sysfsHostileTree(t *testing.T) (root, port string) {
	t.Helper()
	root = t.TempDir()
	class := filepath.Join(root, "class")
	if err := sysfstest.Build(class, sysfstest.MLX5RoCE(1, 1)); err != nil {
		t.Fatal(err)
	}
	return root, sysfstest.PortDir(class, "mlx5_0", 1)
}

// sysfsReadBounded runs one scrape and fails the test if it does not return
// within limit: a hostile file must never hang the scrape.
func sysfsReadBounded(t *testing.T, r *SysfsReader, limit time.Duration) (*SysfsScrape, error) {
	t.Helper()
	type result struct {
		sc  *SysfsScrape
		err error
	}
	done := make(chan result, 1)
	go func() {
		sc, err := r.Read(context.Background())
		done <- result{sc, err}
	}()
	select {
	case res := <-done:
		return res.sc, res.err
	case <-time.After(limit):
		t.Fatalf("scrape still running after %v", limit)
		return nil, nil
	}
}

// TestSysfsHostileFiles is issue 8.11: a counter tree an attacker (or a
// broken driver, or a bad bind mount) shaped must cost the scrape that one
// value, never hang it, exhaust memory or read megabytes.
func TestSysfsHostileFiles(t *testing.T) {
	replace := func(t *testing.T, path string) {
		t.Helper()
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		file  string // below the port directory
		setup func(t *testing.T, path string)
		root  bool // needs root
		// skipped: the whole port is left out with a reason containing it;
		// otherwise only the file's counter is absent.
		skipped string
	}{
		{name: "FIFO as a counter", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to /dev/zero as a counter", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "device node like /dev/zero as a counter", file: "counters/symbol_error", root: true, setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := unix.Mknod(p, unix.S_IFCHR|0o444, int(unix.Mkdev(1, 5))); err != nil {
				t.Skipf("mknod refused here: %v", err)
			}
		}},
		{name: "100 MB counter file", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			// Digits at the start, so a reader that reads it whole gets a
			// number out of it; sparse after that.
			if _, err := f.WriteString(strings.Repeat("1", 300)); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(100 << 20); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}},
		{name: "directory as a counter", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dangling symlink as a counter", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := os.Symlink("nowhere", p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "text that is not a counter", file: "counters/symbol_error", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := os.WriteFile(p, []byte("N/A (no PMA)\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "FIFO as the state", file: "state", skipped: "state unreadable", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "FIFO as the counters directory", file: "counters", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to /proc as the counters directory", file: "counters", setup: func(t *testing.T, p string) {
			replace(t, p)
			if err := os.Symlink("/proc/self", p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "counters directory with 5000 entries", file: "counters", setup: func(t *testing.T, p string) {
			for i := range 5000 {
				if err := os.WriteFile(filepath.Join(p, "x"+strconv.Itoa(i)), []byte("1\n"), 0o444); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("skipped: mknod needs root")
			}
			root, port := sysfsHostileTree(t)
			tc.setup(t, filepath.Join(port, tc.file))
			r := newSysfsReader(root, slog.New(slog.DiscardHandler), nil)
			t.Cleanup(func() { r.Close() })
			for scrape := range 2 { // the second from kept-open state
				sc, err := sysfsReadBounded(t, r, 10*time.Second)
				if err != nil {
					t.Fatalf("scrape %d: %v", scrape, err)
				}
				if tc.skipped != "" {
					if len(sc.Ports) != 0 || len(sc.Skipped) != 1 || !strings.Contains(sc.Skipped[0].Reason, tc.skipped) {
						t.Fatalf("scrape %d: ports %d, skipped %+v; want the port skipped for %q", scrape, len(sc.Ports), sc.Skipped, tc.skipped)
					}
					continue
				}
				if len(sc.Ports) != 1 {
					t.Fatalf("scrape %d: %d ports (skipped %+v), want the port kept", scrape, len(sc.Ports), sc.Skipped)
				}
				p := sc.Ports[0]
				if tc.file == "counters" {
					if p.Counters != nil || len(p.HWCounters) == 0 {
						t.Fatalf("scrape %d: counters %v, %d hw_counters; want no counters, hw_counters kept", scrape, p.Counters, len(p.HWCounters))
					}
					continue
				}
				if v, ok := p.Counters["symbol_error"]; ok {
					t.Errorf("scrape %d: symbol_error = %d; a hostile file must be absent", scrape, v)
				}
				if _, ok := p.Counters["port_xmit_data"]; !ok || len(p.HWCounters) == 0 {
					t.Errorf("scrape %d: the other counters are gone: %v", scrape, p.Counters)
				}
			}
		})
	}
}

// TestSysfsHostileDiscovery covers the directories discovery lists (once
// rdmamap's GetRdmaDeviceList and GetPorts, which open them with a plain
// open(2) and would block on a FIFO).
func TestSysfsHostileDiscovery(t *testing.T) {
	fifo := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("FIFO as the ports directory", func(t *testing.T) {
		root, port := sysfsHostileTree(t)
		fifo(t, filepath.Dir(port))
		sc, err := sysfsReadBounded(t, newSysfsReader(root, nil, nil), 10*time.Second)
		if err != nil || len(sc.Ports) != 0 || len(sc.Skipped) != 1 || !strings.Contains(sc.Skipped[0].Reason, "no ports") {
			t.Fatalf("scrape: err %v, skipped %+v; want the device skipped for no ports", err, sc.Skipped)
		}
	})
	t.Run("FIFO as the class directory", func(t *testing.T) {
		root, _ := sysfsHostileTree(t)
		fifo(t, filepath.Join(root, "class", "infiniband"))
		if _, err := sysfsReadBounded(t, newSysfsReader(root, nil, nil), 10*time.Second); !errors.Is(err, ErrNoDevices) {
			t.Fatalf("scrape: %v, want ErrNoDevices", err)
		}
	})
	t.Run("FIFO as a device entry", func(t *testing.T) {
		root, _ := sysfsHostileTree(t)
		fifo(t, filepath.Join(root, "class", "infiniband", "mlx5_0"))
		sc, err := sysfsReadBounded(t, newSysfsReader(root, nil, nil), 10*time.Second)
		if err != nil || len(sc.Ports) != 0 {
			t.Fatalf("scrape: err %v, %d ports; want the device without ports", err, len(sc.Ports))
		}
	})
}

// TestSysfsReadHonoursDeadline: a context that ends during a scrape stops it
// before the next port.
func TestSysfsReadHonoursDeadline(t *testing.T) {
	root := t.TempDir()
	if err := sysfstest.Build(filepath.Join(root, "class"), sysfstest.MLX5RoCE(2, 2)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ports atomic.Int32
	// The clock is read once per ACTIVE port: the context ends while the
	// first port is read.
	now := func() time.Time {
		if ports.Add(1) == 1 {
			cancel()
		}
		return time.Now()
	}
	r := newSysfsReader(root, nil, now)
	defer r.Close()
	if _, err := r.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read = %v, want context.Canceled", err)
	}
	if n := ports.Load(); n != 1 {
		t.Errorf("%d ports read after the context ended, want the scrape to stop after the first", n-1)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := r.Read(expired); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read with an expired deadline = %v, want context.DeadlineExceeded", err)
	}
	// The reader is still usable afterwards.
	if sc, err := r.Read(context.Background()); err != nil || len(sc.Ports) != 4 {
		t.Fatalf("after the deadline: err %v, %d ports, want 4", err, len(sc.Ports))
	}
}

// direntRecord encodes one struct linux_dirent64 the way the kernel does
// (8-byte aligned), for seeds and round trips.
func direntRecord(ino uint64, typ uint8, name string) []byte {
	reclen := (direntNameOff + len(name) + 1 + 7) &^ 7
	rec := make([]byte, reclen)
	binary.NativeEndian.PutUint64(rec[direntInoOff:], ino)
	binary.NativeEndian.PutUint16(rec[direntReclenOff:], uint16(reclen))
	rec[direntTypeOff] = typ
	copy(rec[direntNameOff:], name)
	return rec
}

func TestSysfsParseDirentsRealDirectory(t *testing.T) {
	dir := t.TempDir()
	want := map[string]bool{"symbol_error": true, "port_xmit_data": true, "hw": true}
	for name := range want {
		if name == "hw" {
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("1\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Getdents(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	if err := parseDirents(buf[:n], func(name []byte, ino uint64, typ uint8) error {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, string(name)), &st); err != nil || st.Ino != ino {
			t.Errorf("%s: inode %d, lstat says %d (%v)", name, ino, st.Ino, err)
		}
		if (typ == unix.DT_DIR) != (string(name) == "hw") {
			t.Errorf("%s: type %d", name, typ)
		}
		got[string(name)] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
}

// FuzzSysfsParseDirents: the record walk must never read past a record or
// the buffer, whatever the bytes, and must give back what was encoded.
func FuzzSysfsParseDirents(f *testing.F) {
	seed := slices.Concat(direntRecord(1, unix.DT_DIR, "."), direntRecord(2, unix.DT_DIR, ".."),
		direntRecord(77, unix.DT_REG, "symbol_error"), direntRecord(78, unix.DT_LNK, "mlx5_0"))
	f.Add(seed, "port_rcv_data")
	f.Add(seed[:30], "x")
	f.Add([]byte{}, "a")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		_ = parseDirents(b, func(n []byte, ino uint64, typ uint8) error {
			if len(n) == 0 || bytes.IndexByte(n, 0) >= 0 || string(n) == "." || string(n) == ".." {
				t.Fatalf("entry name %q", n)
			}
			return nil
		})
		if name == "" || name == "." || name == ".." || strings.IndexByte(name, 0) >= 0 || len(name) > 255 {
			return
		}
		var got []string
		buf := slices.Concat(direntRecord(5, unix.DT_REG, name), direntRecord(6, unix.DT_DIR, name+"x"))
		if err := parseDirents(buf, func(n []byte, ino uint64, typ uint8) error {
			got = append(got, fmt.Sprintf("%s/%d/%d", n, ino, typ))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{fmt.Sprintf("%s/5/%d", name, unix.DT_REG), fmt.Sprintf("%sx/6/%d", name, unix.DT_DIR)}
		if !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
