package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

// warmUp: the first seconds fill the pipeline (first batches are
// baselines); they are left out of the windows.
const warmUp = 5 * time.Second

// window sums up seconds of the per-second report.
type window struct {
	pub, proc                  float64
	lagMean, lagMax, behindMax time.Duration
	pendMean                   float64
	pendMax                    uint64
}

func summarise(ss []second) window {
	var a window
	for _, s := range ss {
		a.pub += s.published / float64(len(ss))
		a.proc += s.processed / float64(len(ss))
		a.lagMean += s.lag / time.Duration(len(ss))
		a.lagMax = max(a.lagMax, s.lag)
		a.behindMax = max(a.behindMax, s.behind)
		a.pendMean += float64(s.sinkPending) / float64(len(ss))
		a.pendMax = max(a.pendMax, s.sinkPending)
	}
	return a
}

// windows splits the steady seconds (after warmUp) into the first and the
// last window of length win.
func windows(seconds []second, duration time.Duration) (steady, first, last []second, win time.Duration) {
	for _, s := range seconds {
		if s.at >= warmUp {
			steady = append(steady, s)
		}
	}
	if len(steady) == 0 {
		return nil, nil, nil, 0
	}
	win = min(time.Minute, (duration-warmUp)/4)
	end := steady[len(steady)-1].at
	for _, s := range steady {
		if s.at < warmUp+win {
			first = append(first, s)
		}
		if s.at > end-win {
			last = append(last, s)
		}
	}
	return steady, first, last, win
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// report prints the verdict of the trial.
func (t *trial) report(res *pipeline.Result, drained bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, w, lat := t.f, t.stdout, t.latencies
	steady, first, last, win := windows(t.seconds, f.duration)
	if len(steady) < 4 {
		return fmt.Errorf("only %d steady seconds measured; run longer", len(steady))
	}
	a, b, all := summarise(first), summarise(last), summarise(steady)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ports := float64(f.ports)
	// Lag grew: the last window is more than one interval behind the first
	// one, or the sink holds more than one interval of messages more.
	perInterval := ports / bench.PortsPerHost
	lagGrew := b.lagMean > a.lagMean+f.interval || b.lagMax > a.lagMax+f.interval
	sinkGrew := b.pendMean > a.pendMean+perInterval
	genBehind := all.behindMax > f.interval
	p99 := percentile(lat, 0.99)
	holds := !lagGrew && !sinkGrew && !genBehind && drained && len(lat) > 0 && p99 < f.maxP99

	ms10 := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	fmt.Fprintln(w)
	fmt.Fprintf(w, "window: %s measured, %d steady seconds (first %s left out); windows compared: first and last %s\n",
		t.cpuWall.Round(time.Second), len(steady), warmUp, win.Round(time.Second))
	fmt.Fprintf(w, "samples/s published %.0f, processed %.0f (steady mean; %.0f ports at 1/%s = %.0f expected)\n",
		all.pub, all.proc, ports, f.interval, ports/f.interval.Seconds())
	fmt.Fprintf(w, "lag (data time): first window mean %s max %s; last window mean %s max %s; grew: %v\n",
		ms10(a.lagMean), ms10(a.lagMax), ms10(b.lagMean), ms10(b.lagMax), lagGrew)
	fmt.Fprintf(w, "sink pending (messages): first window mean %.0f max %d; last window mean %.0f max %d; grew: %v\n",
		a.pendMean, a.pendMax, b.pendMean, b.pendMax, sinkGrew)
	fmt.Fprintf(w, "load generator behind real time: max %s\n", all.behindMax.Round(time.Millisecond))
	fmt.Fprintf(w, "drained within %s after the window: %v\n", f.drainGrace, drained)
	fmt.Fprintf(w, "sample-to-event latency over %d events (%d unmatched): p50 %s p99 %s max %s\n",
		len(lat), t.unmatched, percentile(lat, 0.5).Round(time.Millisecond), p99.Round(time.Millisecond), percentile(lat, 1).Round(time.Millisecond))
	if res != nil {
		types := make([]string, 0, len(res.ByType))
		for typ, st := range res.ByType {
			types = append(types, fmt.Sprintf("%s %d/%d/%d", typ, st[schemas.StateOpen], st[schemas.StateUpdate], st[schemas.StateResolved]))
		}
		sort.Strings(types)
		fmt.Fprintf(w, "events by type (open/update/resolved): %s\n", strings.Join(types, ", "))
	}
	fmt.Fprintf(w, "cpu: this process %.2f cores (%s CPU in %s); whole machine busy %.0f%% of %d cores (ClickHouse and other users included)\n",
		t.cpuSelf.Seconds()/t.cpuWall.Seconds(), t.cpuSelf.Round(100*time.Millisecond), t.cpuWall.Round(time.Second), t.sysBusy*100, runtime.NumCPU())
	verdict := "holds"
	if !holds {
		verdict = "does not hold"
	}
	fmt.Fprintf(w, "result: %s (ports %d)\n", verdict, f.ports)
	return nil
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimes is the first line of /proc/stat: the whole machine's CPU time,
// busy and in all (other users and ClickHouse included).
type cpuTimes struct{ busy, total uint64 }

func readCPUTimes() cpuTimes {
	fh, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	if !sc.Scan() {
		return cpuTimes{}
	}
	fields := strings.Fields(sc.Text())
	var t cpuTimes
	for i, v := range fields[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	return t
}

func (t cpuTimes) busySince(t0 cpuTimes) float64 {
	if t.total <= t0.total {
		return 0
	}
	return float64(t.busy-t0.busy) / float64(t.total-t0.total)
}
