package collector

// Benchmark collector-scrape-cpu of BENCHMARKS.md: collector scrape CPU on
// an mlx5-like sysfs fixture (sysfstest.MLX5RoCE(8, 2): 8 devices x 2
// ports, full counter sets) against rdmamap's own GetRdmaSysfsAllPortsStats over every device.
//
//	go test -run '^$' -bench '^BenchmarkSysfsScrape$' ./collector
//
// rdmamap only reads /sys/class/infiniband, so, like the namespace test, the
// outer run builds the fixture and re-executes this binary under
// `unshare -m` with the tree bind-mounted over /sys/class. The inner run
// measures both readers in the same process, interleaved round by round,
// in process CPU time (getrusage: GC included), and prints one line the
// outer run turns into metrics. Needs root; skipped otherwise.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Mellanox/rdmamap"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
)

const (
	sysfsBenchTreeEnv = "RDMAWATCH_SYSFS_BENCH_TREE"
	sysfsBenchLine    = "SYSFS-SCRAPE-BENCH"
	// sysfsBenchRounds x sysfsBenchPerRound scrapes of each reader,
	// alternating, so drift of a shared machine hits both alike.
	sysfsBenchRounds   = 20
	sysfsBenchPerRound = 5
)

type sysfsBenchResult struct {
	refNs, readNs, scrapeNs float64 // CPU ns per scrape of the whole host
	ports, counters         int
}

var (
	sysfsBenchOnce sync.Once
	sysfsBenchRes  *sysfsBenchResult
	sysfsBenchErr  string
)

func BenchmarkSysfsScrape(b *testing.B) {
	if os.Getenv(sysfsBenchTreeEnv) != "" {
		sysfsBenchInner(b)
		return
	}
	if os.Geteuid() != 0 {
		b.Skipf("skipped: bind-mounting the fixture over /sys/class needs root (CAP_SYS_ADMIN); running as uid %d", os.Geteuid())
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		b.Skipf("skipped: unshare(1) is needed for a private mount namespace: %v", err)
	}
	// The inner run does its own fixed number of rounds; run it once and
	// report the same figures for every b.N the framework asks for.
	sysfsBenchOnce.Do(func() { sysfsBenchRes, sysfsBenchErr = sysfsBenchOuter(b, unshare) })
	if sysfsBenchRes == nil {
		b.Skip(sysfsBenchErr)
	}
	r := sysfsBenchRes
	for range b.N {
	}
	b.ReportMetric(r.refNs, "ref-cpu-ns/scrape")
	b.ReportMetric(r.readNs, "read-cpu-ns/scrape")
	b.ReportMetric(r.scrapeNs, "scrape+delta-cpu-ns/scrape")
	b.ReportMetric(r.readNs/r.refNs, "read/rdmamap")
	b.ReportMetric(r.scrapeNs/r.refNs, "scrape+delta/rdmamap")
}

func sysfsBenchOuter(b *testing.B, unshare string) (*sysfsBenchResult, string) {
	tree, err := os.MkdirTemp("", "rdmawatch-sysfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tree)
	if err := sysfstest.Build(tree, sysfstest.MLX5RoCE(8, 2)); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, sysfsNSMarker), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := `mount --bind "$1" /sys/class || exit ` + strconv.Itoa(sysfsNSMountFailed) + `
exec "$2" -test.run '^$' -test.bench '^BenchmarkSysfsScrape$' -test.benchtime=1x -test.count=1 -test.timeout=150s`
	cmd := exec.CommandContext(ctx, unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", tree, os.Args[0])
	cmd.Env = append(os.Environ(), sysfsBenchTreeEnv+"="+tree)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == sysfsNSMountFailed {
			return nil, fmt.Sprintf("skipped: mount --bind over /sys/class refused: %s", out)
		}
		if bytes.HasPrefix(out, []byte("unshare: ")) {
			return nil, fmt.Sprintf("skipped: unshare -m failed: %s", out)
		}
		b.Fatalf("inner benchmark run failed: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[0] != sysfsBenchLine {
			continue
		}
		var r sysfsBenchResult
		r.refNs, _ = strconv.ParseFloat(f[1], 64)
		r.readNs, _ = strconv.ParseFloat(f[2], 64)
		r.scrapeNs, _ = strconv.ParseFloat(f[3], 64)
		r.ports, _ = strconv.Atoi(f[4])
		r.counters, _ = strconv.Atoi(f[5])
		if r.refNs <= 0 || r.ports != 16 {
			b.Fatalf("inner run gave %+v:\n%s", r, out)
		}
		return &r, ""
	}
	b.Fatalf("inner run printed no %s line:\n%s", sysfsBenchLine, out)
	return nil, ""
}

func sysfsCPUNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func sysfsBenchInner(b *testing.B) {
	if _, err := os.Stat(filepath.Join("/sys/class", sysfsNSMarker)); err != nil {
		b.Fatalf("/sys/class is not the fixture tree (marker: %v); refusing to benchmark the host", err)
	}
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)

	// The reference: what rdmamap itself offers for "all counters of all
	// ports", over every device it lists.
	var sink int
	ref := func() {
		for _, dev := range rdmamap.GetRdmaDeviceList() {
			st, err := rdmamap.GetRdmaSysfsAllPortsStats(dev)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range st.PortStats {
				sink += len(p.Stats) + len(p.HwStats)
			}
		}
	}
	// Ours, as the collector runs it: one long-lived host source (sysfs
	// only, ethtool off: the fixture's netdevs do not exist) ...
	src, err := NewHostSource("bench-host", WithEthtool(false), WithHostLogger(logger))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	read := func() *Reading {
		rd, err := src.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return rd
	}
	// ... and, for the whole scrape, the delta engine after it.
	eng := NewEngine(nil)
	scrape := func() {
		if eng.Apply(read()) == nil {
			b.Fatal("engine returned no batch")
		}
	}

	rd := read()
	ports, counters := len(rd.Ports), 0
	for _, p := range rd.Ports {
		counters += len(p.Counters) + len(p.HWCounters)
	}
	for range 3 { // warm both paths (page cache, kept-open files)
		ref()
		scrape()
	}
	measure := func(fn func()) int64 {
		t0 := sysfsCPUNanos()
		for range sysfsBenchPerRound {
			fn()
		}
		return sysfsCPUNanos() - t0
	}
	var refNs, readNs, scrapeNs int64
	for range sysfsBenchRounds {
		refNs += measure(ref)
		readNs += measure(func() { read() })
		scrapeNs += measure(scrape)
	}
	n := float64(sysfsBenchRounds * sysfsBenchPerRound)
	for range b.N {
	}
	fmt.Printf("%s %.0f %.0f %.0f %d %d\n", sysfsBenchLine, float64(refNs)/n, float64(readNs)/n, float64(scrapeNs)/n, ports, counters)
	_ = sink
}

// FuzzSysfsParseCounter holds the kept-open reader's parser to rdmamap's
// readCounter semantics (trim newlines, ParseUint base 10), except that text
// ParseUint refuses is unknown (ok false), not 0.
func FuzzSysfsParseCounter(f *testing.F) {
	for _, s := range []string{"0\n", "12345\n", "N/A (no PMA)\n", "", "\n\n7\n", "18446744073709551615", "18446744073709551616\n", "99999999999999999999999", " 1\n", "+1", "1_0", "20000000000000000000A"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := strconv.ParseUint(strings.Trim(string(b), "\n"), 10, 64)
		if err != nil {
			want = 0
		}
		if got, ok := parseSysfsCounter(b); got != want || ok != (err == nil) {
			t.Fatalf("parseSysfsCounter(%q) = %d, %v; ParseUint says %d, %v", b, got, ok, want, err)
		}
	})
}
