// Package telemetry is the self-observability every rdmawatch role shares:
// one HTTP listener with /metrics (Prometheus text format), /healthz (the
// process is alive) and /readyz (its dependencies are reachable and its
// streams checked), a build_info metric, and the readiness gauge. Each role
// registers its own metrics on Registry(), read from its Stats snapshot at
// scrape time, so the hot paths carry no Prometheus code.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// Namespace prefixes every metric.
const Namespace = "rdmawatch"

// DefaultListen is the port every role listens on unless told otherwise
// (the Kubernetes probes and the Prometheus scrape configs use it).
const DefaultListen = ":9464"

// Check reports whether one dependency is ready; nil means ready.
type Check func(ctx context.Context) error

// Server serves a role's metrics and health.
type Server struct {
	role string
	reg  *prometheus.Registry
	log  *slog.Logger

	mu     sync.Mutex
	checks map[string]Check
}

// New makes the registry of a role with the Go runtime, process and build
// metrics and the readiness gauge.
func New(role, version string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{role: role, reg: prometheus.NewRegistry(), log: log, checks: map[string]Check{}}
	s.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info",
			Help:        "Always 1; the labels say which build of which role runs.",
			ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "role": role},
		}, func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "ready",
			Help:        "1 when every readiness check of the role passes (what /readyz answers), else 0.",
			ConstLabels: prometheus.Labels{"role": role},
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if s.Ready(ctx) != nil {
				return 0
			}
			return 1
		}),
	)
	return s
}

// Registry is where the role registers its metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Role names the role in labels.
func (s *Server) Role() string { return s.role }

// AddCheck adds (or replaces) a readiness check.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	s.checks[name] = c
	s.mu.Unlock()
}

// Ready runs every check; the error lists the failing ones by name.
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := make(map[string]Check, len(s.checks))
	for n, c := range s.checks {
		checks[n] = c
	}
	s.mu.Unlock()
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := checks[n](ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	if len(checks) == 0 {
		errs = append(errs, errors.New("starting"))
	}
	return errors.Join(errs...)
}

// WatchNATS adds the connection's readiness and metrics: connected or not,
// and reconnects so far.
func (s *Server) WatchNATS(nc *nats.Conn) {
	s.AddCheck("nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", strings.ToLower(nc.Status().String()))
		}
		return nil
	})
	labels := prometheus.Labels{"role": s.role}
	s.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "nats_connected", Help: "1 while the NATS connection is up.", ConstLabels: labels},
			func() float64 {
				if nc.IsConnected() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "nats_reconnects_total", Help: "Reconnections to NATS since the role started.", ConstLabels: labels},
			func() float64 { return float64(nc.Stats().Reconnects) }),
	)
}

// Handler serves /metrics, /healthz and /readyz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Serve listens on addr until ctx ends; "" serves nothing. It returns once
// listening (so a bad address fails the role's start) and shuts the
// listener down when ctx ends; the returned channel closes after that.
func (s *Server) Serve(ctx context.Context, addr string) (<-chan struct{}, error) {
	return s.ServeWeb(ctx, addr, "")
}

// ServeWeb is Serve with webConfig, a Prometheus exporter-toolkit web
// configuration file (TLS, client certificates, basic auth with bcrypt
// hashes: the format node_exporter and Prometheus read, so one file and one
// way of rotating it serve the fleet's exporters alike); "" serves plain
// HTTP. The file is read and checked before listening, so a bad one fails
// the role's start with the file named.
func (s *Server) ServeWeb(ctx context.Context, addr, webConfig string) (<-chan struct{}, error) {
	done := make(chan struct{})
	if addr == "" {
		close(done)
		return done, nil
	}
	if webConfig != "" {
		if err := web.Validate(webConfig); err != nil {
			close(done)
			return done, fmt.Errorf("--web-config-file %s: %w", webConfig, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		close(done)
		return done, fmt.Errorf("--listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(done)
		var err error
		if webConfig == "" {
			err = srv.Serve(ln)
		} else {
			noSystemd := false
			err = web.Serve(ln, srv, &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: &noSystemd, WebConfigFile: &webConfig}, s.log)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("telemetry listener stopped", "addr", addr, "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
	return done, nil
}
