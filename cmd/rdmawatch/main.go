// Command rdmawatch finds RDMA packet-loss causes across a fleet: one binary
// with a subcommand per part (collector, processor, sink) and the jobs that
// wire them together in one process (replay, run).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// stopProfile ends a --profile-cpu profile; a no-op without one.
var stopProfile = func() {}

// global holds the settings every subcommand shares.
type global struct {
	natsURL     string
	natsCreds   string
	natsNKey    string
	natsTLSCA   string
	natsTLSCert string
	natsTLSKey  string
	clickhouse  string
	chTLSCA     string
	logLevel    string
	cpuProfile  string
	configPath  string
	logFormat   string
	listen      string
	webConfig   string
	log         *slog.Logger
	// wait is --wait; connectWait is what this command gives NATS: wait
	// for a one-shot command, 0 (as long as it takes) for a role.
	wait, connectWait time.Duration
	// warnedSkipVerify: the skip_verify warning is written once.
	warnedSkipVerify bool
	// validators are the options checks of the commands (validates).
	validators map[*cobra.Command]validator
}

// roles wait for their services as long as it takes: a role started before
// NATS is up must not exit only to be restarted into the same wait.
var roles = map[string]bool{"collector": true, "processor": true, "sink": true, "alert": true}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &global{}
	if err := newRootOf(g).ExecuteContext(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// SIGTERM while still waiting for NATS or ClickHouse: nothing
			// was started, nothing is lost; a stop is not a failure.
			g.lastWords(os.Stderr, slog.LevelInfo, "stopped by signal before the service was reachable", nil)
			return
		}
		g.lastWords(os.Stderr, slog.LevelError, "", err)
		os.Exit(1)
	}
}

// lastWords writes the line a command ends with. With --log-format json it
// is one more JSON object through the same handler, so a log pipeline that
// parses every line does not choke on the one that matters most; otherwise
// (text logs, or an error before the logger exists, such as a bad flag) it
// is a plain "rdmawatch: ..." line. Whatever err quotes, a URL or DSN in it
// loses its password.
func (g *global) lastWords(w io.Writer, lvl slog.Level, msg string, err error) {
	text := msg
	var attrs []any
	if err != nil {
		text = redact.String(err.Error())
		attrs = []any{"err", text}
		if msg == "" {
			msg = "rdmawatch stopped"
		}
	}
	if g.log != nil && g.logFormat == "json" {
		g.log.Log(context.Background(), lvl, msg, attrs...)
		return
	}
	fmt.Fprintln(w, "rdmawatch:", text)
}

func newRoot() *cobra.Command { return newRootOf(&global{}) }

// newRootOf builds the command tree on g, which main keeps to write the
// last line through the logger the command set up.
func newRootOf(g *global) *cobra.Command {
	root := &cobra.Command{
		Use:               "rdmawatch",
		Short:             "Find RDMA packet-loss causes across a fleet, layer by layer",
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return g.setUp(cmd) },
		PersistentPostRun: func(cmd *cobra.Command, args []string) { stopProfile() },
		// --version, as nats-server, node_exporter and Prometheus have it;
		// cobra answers it before any PreRun, so no config is read.
		Version: version,
	}
	root.SetVersionTemplate("{{.Version}}")
	root.Version = currentBuildInfo().String()
	g.register(root.PersistentFlags())
	root.AddCommand(
		newVersionCmd(),
		newCollectorCmd(g),
		newProcessorCmd(g),
		newSinkCmd(g),
		newMigrateCmd(g),
		newStreamsCmd(g),
		newQueryCmd(g),
		newPostmortemCmd(g),
		newRetentionCmd(g),
		newRollupCmd(g),
		newAlertCmd(g),
		newEventsCmd(g),
		newDeadLetterCmd(g),
		newConfigCmd(g),
	)
	root.AddCommand(labCommands(g)...)
	describeEnv(root)
	return root
}

// setUp runs before every command: the configuration file and the
// environment under the flags, the checks of the result, the logger, the
// wait for services, the CPU profile. No command sets a PreRun of its own
// (cobra would run that one instead of this), which TestEveryCommandSetsUp
// holds.
func (g *global) setUp(cmd *cobra.Command) error {
	g.resolveConfigPath(cmd.Root())
	if err := applyConfig(cmd.Root(), cmd, g.configPath); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return err
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(g.logLevel)) // validate checked it
	log, err := newLogger(os.Stderr, g.logFormat, lvl)
	if err != nil {
		return err
	}
	g.log = log
	slog.SetDefault(g.log)
	if err := g.validateCommand(cmd); err != nil {
		return err
	}
	if !roles[cmd.Name()] || cmd.Parent() != cmd.Root() {
		g.connectWait = g.wait
	}
	if g.cpuProfile != "" {
		f, err := os.Create(g.cpuProfile)
		if err != nil {
			return fmt.Errorf("--profile-cpu: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--profile-cpu: %w", err)
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	return nil
}

// resolveConfigPath is --config, else RDMAWATCH_CONFIG: the one flag
// applyConfig leaves alone, since it names the file applyConfig reads.
func (g *global) resolveConfigPath(root *cobra.Command) {
	if root.PersistentFlags().Changed("config") {
		return
	}
	if v := os.Getenv(envName("config")); v != "" {
		g.configPath = v
	}
}

// register defines the flags every command shares. None takes its default
// from the environment: the environment reaches every flag through
// applyConfig, as the file does, and --help shows the built-in defaults.
func (g *global) register(pf *pflag.FlagSet) {
	pf.StringVar(&g.natsURL, "nats", "nats://127.0.0.1:4222", "NATS server URL(s), comma separated")
	pf.StringVar(&g.natsCreds, "nats-creds", "", "NATS credentials file")
	pf.StringVar(&g.natsNKey, "nats-nkey", "", "NATS nkey seed file of the user")
	pf.StringVar(&g.natsTLSCA, "nats-tls-ca", "", "CA certificate(s) (PEM) that sign the NATS server's certificate")
	pf.StringVar(&g.natsTLSCert, "nats-tls-cert", "", "client certificate (PEM) for a NATS server that verifies clients")
	pf.StringVar(&g.natsTLSKey, "nats-tls-key", "", "key (PEM) of --nats-tls-cert")
	pf.StringVar(&g.clickhouse, "clickhouse", "", "ClickHouse DSN, e.g. clickhouse://user:pass@127.0.0.1:9000/default, ?secure=true for TLS")
	pf.StringVar(&g.chTLSCA, "clickhouse-tls-ca", "", "CA certificate(s) (PEM) that sign ClickHouse's certificate, with ?secure=true in the DSN")
	pf.StringVar(&g.cpuProfile, "profile-cpu", "", "write a CPU profile of the whole command to this file (go tool pprof)")
	pf.StringVar(&g.configPath, "config", "", "YAML file of settings: global flags at the top, a section per command; flags and RDMAWATCH_<FLAG> variables win over it")
	pf.StringVar(&g.listen, "listen", "", "roles (collector, processor, sink, alert): serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 or the host's own address; an empty host (:9464) is every interface; default off")
	pf.StringVar(&g.webConfig, "web-config-file", "", "TLS and basic auth of --listen: a Prometheus exporter-toolkit web configuration file, as node_exporter reads")
	pf.DurationVar(&g.wait, "wait", 30*time.Second, "one-shot commands (streams, events, migrate, ...): give up on an unreachable NATS after this long; the roles wait as long as it takes")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json (one object per line)")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// validate checks the global settings after layering.
func (g *global) validate() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	if g.logFormat != "text" && g.logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
	if g.wait <= 0 {
		return fmt.Errorf("--wait %s: want a positive duration such as 30s", g.wait)
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.TrimSpace(h)
}

// loadTopology reads a topology file; no path means no topology (the
// detectors that need one then work on what the samples alone say).
func loadTopology(path string) (*schemas.Topology, error) {
	if path == "" {
		return nil, nil
	}
	return schemas.LoadTopology(path)
}

// requireClickHouse is the error of a command that needs ClickHouse and has
// no DSN.
func (g *global) requireClickHouse() error {
	if g.clickhouse == "" {
		return fmt.Errorf("no ClickHouse DSN: set --clickhouse or RDMAWATCH_CLICKHOUSE")
	}
	if err := checkURLs("--clickhouse", g.clickhouse, false, clickhouseSchemes...); err != nil {
		return err
	}
	if skipVerify(g.clickhouse) && !g.warnedSkipVerify && g.log != nil {
		// Allowed (a lab's self-signed server), but never silently: the
		// connection is encrypted to whoever answers.
		g.log.Warn("--clickhouse has skip_verify=true: the server's certificate is not verified; use --clickhouse-tls-ca instead", "clickhouse", redact.String(g.clickhouse))
		g.warnedSkipVerify = true
	}
	return nil
}

// skipVerify reports whether a DSN turns TLS certificate verification off.
func skipVerify(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	for k, vs := range u.Query() {
		if strings.EqualFold(k, "skip_verify") {
			for _, v := range vs {
				if b, err := strconv.ParseBool(v); err == nil && b {
					return true
				}
			}
		}
	}
	return false
}

// natsOptions are the connection settings of every command that dials NATS.
func (g *global) natsOptions(name string) natsutil.ConnectOptions {
	return natsutil.ConnectOptions{
		URL: g.natsURL, Creds: g.natsCreds, NKey: g.natsNKey,
		TLSCA: g.natsTLSCA, TLSCert: g.natsTLSCert, TLSKey: g.natsTLSKey,
		Name: name, Log: g.log, Wait: g.connectWait,
	}
}

// chOptions are the connection settings of every command that opens
// ClickHouse besides its DSN.
func (g *global) chOptions() []chdb.Option {
	if g.chTLSCA == "" {
		return nil
	}
	return []chdb.Option{chdb.WithTLSCA(g.chTLSCA)}
}

// natsURLForLog is --nats as it may be logged: without credentials.
func natsURLForLog(g *global) string { return redact.String(g.natsURL) }
