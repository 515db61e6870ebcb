package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

// stage is one process of the pipeline the benchmark started (nats-server,
// a processor, a sink), or one it only watches (ClickHouse, itself).
type stage struct {
	name   string // processor-0, sink-0, nats, clickhouse, generator
	role   string // nats, processor, sink, clickhouse, generator
	pid    int
	listen string // host:port of /metrics and /readyz; "" for none
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
	err    error // of the process once done
}

// startStage starts a child process whose output goes to a log file in dir.
// It dies with the benchmark (Pdeathsig on Linux), so an interrupted run
// leaves nothing behind.
func startStage(dir, name, role, listen string, bin string, args ...string) (*stage, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	st := &stage{name: name, role: role, pid: cmd.Process.Pid, listen: listen, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		st.err = cmd.Wait()
		out.Close()
		close(st.done)
	}()
	return st, nil
}

// exited says whether the process ended, and how.
func (s *stage) exited() (bool, error) {
	if s.cmd == nil {
		return false, nil
	}
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}

// stop asks the process to end (SIGTERM: the roles finish their work and
// write their CPU profile) and kills it after grace.
func (s *stage) stop(grace time.Duration) error {
	if s.cmd == nil {
		return nil
	}
	if done, err := s.exited(); done {
		return err
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.err
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM: killed", s.name, grace)
	}
}

// tail is the end of the stage's log, for an error message.
func (s *stage) tail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// waitReady polls the role's /readyz until it answers 200.
func (s *stage) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if done, err := s.exited(); done {
			return fmt.Errorf("%s exited before it was ready (%v); its log %s ends:\n%s", s.name, err, s.log, s.tail())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.listen+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s; its log %s ends:\n%s", s.name, timeout, s.log, s.tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// usage is a stage's CPU time and resident memory at one moment.
type usage struct {
	cpu float64 // seconds, user + system, since the process started
	rss int     // bytes
	ok  bool
}

func (s *stage) usage(fs procfs.FS) usage {
	if s.pid == 0 {
		return usage{}
	}
	p, err := fs.Proc(s.pid)
	if err != nil {
		return usage{}
	}
	st, err := p.Stat()
	if err != nil {
		return usage{}
	}
	return usage{cpu: st.CPUTime(), rss: st.ResidentMemory(), ok: true}
}

// scrape reads the role's /metrics and sums each named metric over its
// series (filtered by label=value when given). The roles' own figures
// (samples processed, rows ClickHouse accepted, data-time lag) come from
// there.
func (s *stage) scrape(ctx context.Context) (map[string]*metricSum, error) {
	if s.listen == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.listen+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", s.name, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", s.name, err)
	}
	out := map[string]*metricSum{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" || l.GetName() == "stream" {
					label = "{" + l.GetValue() + "}"
				}
			}
			add := func(key string, v float64) {
				ms := out[key]
				if ms == nil {
					ms = &metricSum{}
					out[key] = ms
				}
				ms.sum += v
				ms.max = max(ms.max, v)
				ms.n++
			}
			if h := m.GetHistogram(); h != nil {
				add(name+"_sum"+label, h.GetSampleSum())
				add(name+"_count"+label, float64(h.GetSampleCount()))
				continue
			}
			add(name+label, m.GetCounter().GetValue()+m.GetGauge().GetValue()+m.GetUntyped().GetValue())
		}
	}
	return out, nil
}

// metricSum is one metric over its series.
type metricSum struct {
	sum, max float64
	n        int
}

func metric(ms map[string]*metricSum, key string) metricSum {
	if m := ms[key]; m != nil {
		return *m
	}
	return metricSum{}
}

// listenerPID finds the process listening on the TCP port of addr on this
// machine (ClickHouse's, to watch its CPU). 0 when none is found: a remote
// server, or a kernel that hides it.
func listenerPID(fs procfs.FS, addr string) int {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, read := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue
		}
		for _, l := range lines {
			if l.LocalPort == port && l.St == 0x0A { // TCP_LISTEN
				inodes[fmt.Sprintf("socket:[%d]", l.Inode)] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if inodes[t] {
				return p.PID
			}
		}
	}
	return 0
}

// freeAddr checks that nothing listens on addr yet: a port in use would
// make a role fail later with a less clear message.
func freeAddr(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port for a stage: %w (choose another --port-base)", err)
	}
	return l.Close()
}

var errStageExited = errors.New("a stage exited during the run")
