package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// connectJS dials NATS, waiting with backoff while the server is not up
// yet, and checks (never changes) the streams the role needs: a missing or
// incompatible stream stops the role with the stream and field named.
func connectJS(cmd *cobra.Command, g *global, name string, streams ...string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := natsutil.ConnectWait(cmd.Context(), g.natsOptions(name))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	if err := natsutil.CheckStreams(cmd.Context(), js, streams...); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// deprecatePartitions keeps --partitions accepted on the roles, which no
// longer use it: the partition count belongs to the counters stream.
func deprecatePartitions(cmd *cobra.Command) {
	var ignored int
	cmd.Flags().IntVar(&ignored, "partitions", 0, "ignored: the counters stream's transform sets the partition count (rdmawatch streams apply --partitions)")
	_ = cmd.Flags().MarkDeprecated("partitions", "the partition count is the counters stream's; set it with `rdmawatch streams apply --partitions N`")
}

func newProcessorCmd(g *global) *cobra.Command {
	var (
		topologyPath        string
		instance, instances int
		lateness, warmup    time.Duration
		group, member       string
		memberTTL           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Run the detectors over the counters stream and publish incident events",
		Long: `processor consumes the partitions of the counters stream it owns (partition p
belongs to instance p mod --instances), keeps per-port windows in data time,
runs every registered detector and publishes events. The partition count is
read from the counters stream's transform (set by rdmawatch streams apply).
After a restart it rebuilds its windows from the last --warmup of the stream;
event ids are deterministic, so re-emitted events are dropped by JetStream's
duplicate window.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if instances < 1 || instance < 0 || instance >= instances {
				return fmt.Errorf("--instance %d of --instances %d: want 0 <= instance < instances", instance, instances)
			}
			topo, err := loadTopology(topologyPath)
			if err != nil {
				return err
			}
			tel, err := serveTelemetry(cmd, g, "processor")
			if err != nil {
				return err
			}
			nc, js, err := connectJS(cmd, g, fmt.Sprintf("rdmawatch-processor-%d", instance),
				schemas.StreamCounters, schemas.StreamEvents, schemas.StreamDeadLetter)
			if err != nil {
				return err
			}
			defer nc.Close()
			partitions, err := natsutil.Partitions(cmd.Context(), js)
			if err != nil {
				return err
			}
			if instances > partitions {
				return fmt.Errorf("%w: stream %s: subject_transform: %d partitions cannot feed --instances %d (instances %d.. would own none); run `rdmawatch streams apply --partitions N` with N >= %d",
					natsutil.ErrStreamIncompatible, schemas.StreamCounters, partitions, instances, partitions, instances)
			}
			settings, err := detectorSettings(g.configPath)
			if err != nil {
				return err
			}
			cfg := engine.Config{
				ConfigureDetectors: settings.Apply,
				Partitions:         partitions,
				Topology:           topo,
				AllowedLateness:    lateness,
				WarmUp:             warmup,
			}
			var p interface {
				Run(context.Context) error
				Stats() engine.Stats
			}
			if group != "" {
				if cmd.Flags().Changed("instance") || cmd.Flags().Changed("instances") {
					return errors.New("--group shares the partitions among its live members: drop --instance and --instances")
				}
				cfg.Group, cfg.Member, cfg.MemberTTL = group, member, memberTTL
				p, err = engine.NewElastic(js, cfg, g.log)
			} else {
				cfg.Instances, cfg.Instance = instances, instance
				p, err = engine.New(js, cfg, g.log)
			}
			if err != nil {
				return err
			}
			tel.WatchNATS(nc)
			tel.RegisterProcessor(p.Stats, partitions)
			tel.AddCheck("partitions", func(context.Context) error {
				if p.Stats().PartitionsOwned == 0 {
					return errors.New("owns no partition yet")
				}
				return nil
			})
			g.log.Info("processor started", "instance", instance, "instances", instances, "group", group, "partitions", partitions, "nats", natsURLForLog(g))
			err = p.Run(cmd.Context())
			st := p.Stats()
			g.log.Info("processor stopped", "reason", stopReason(cmd, err), "processed", st.Processed, "events", st.Events)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&topologyPath, "topology", envOr("RDMAWATCH_TOPOLOGY", ""), "fabric topology file, format v1 (env RDMAWATCH_TOPOLOGY)")
	f.IntVar(&instance, "instance", 0, "this instance's index, from 0")
	f.IntVar(&instances, "instances", 1, "number of processor instances sharing the partitions")
	f.StringVar(&group, "group", "", "share the partitions with the live members of this processor group instead of --instance/--instances: a member that dies is taken over within --member-ttl plus a warm-up")
	f.StringVar(&member, "member", "", "this processor's name in --group (default: host, pid and a random tail)")
	f.DurationVar(&memberTTL, "member-ttl", engine.DefaultMemberTTL, "how long a silent group member keeps its partitions")
	deprecatePartitions(cmd)
	f.DurationVar(&lateness, "allowed-lateness", 0, "how late (data time) a sample may arrive behind the newest one; 0 adapts to the observed collection interval")
	f.DurationVar(&warmup, "warmup", 2*time.Hour, "how much of the stream to re-read at start to rebuild windows")
	return cmd
}

// stopReason says why a role's main loop ended, for its last log line.
func stopReason(cmd *cobra.Command, err error) string {
	switch {
	case cmd.Context().Err() != nil:
		return "signal: drained and stopped"
	case err != nil:
		return "error"
	default:
		return "done"
	}
}

func newStreamsCmd(g *global) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "streams apply|check",
		Short: "Create and check the JetStream streams (the admin step; roles only check)",
	}
	var (
		partitions int
		replicas   int
		memory     bool
		maxAge     []string
		maxBytes   []string
	)
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Create missing streams; set subjects and the partition transform on existing ones",
		Long: `apply creates every rdmawatch stream that does not exist, and on the ones that
do sets only what rdmawatch owns: the subjects and the counters stream's
partition transform (its count only with --partitions). An operator's limits
(max age, max bytes, replicas, duplicate window) are kept unless given here.
It prints each change; nothing when everything was in place. Run it with the
NATS admin's credentials before starting the roles, and again after an upgrade.

Re-partitioning (--partitions) takes effect for new batches only: restart the
processors afterwards so they read the new count.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := natsutil.ApplyOptions{Partitions: partitions, Replicas: replicas, Memory: memory,
				MaxAge: map[string]time.Duration{}, MaxBytes: map[string]int64{}}
			for _, kv := range maxAge {
				name, v, err := streamSetting("--max-age", kv)
				if err != nil {
					return err
				}
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					return fmt.Errorf("--max-age %s: want a duration such as 720h", kv)
				}
				o.MaxAge[name] = d
			}
			for _, kv := range maxBytes {
				name, v, err := streamSetting("--max-bytes", kv)
				if err != nil {
					return err
				}
				b, err := strconv.ParseInt(v, 10, 64)
				if err != nil || b < -1 {
					return fmt.Errorf("--max-bytes %s: want a byte count, -1 for no limit", kv)
				}
				o.MaxBytes[name] = b
			}
			nc, err := natsutil.ConnectWait(cmd.Context(), g.natsOptions("rdmawatch-streams-apply"))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			changes, err := natsutil.ApplyStreams(cmd.Context(), js, o)
			out := cmd.OutOrStdout()
			for _, c := range changes {
				fmt.Fprintln(out, c)
			}
			if err != nil {
				return err
			}
			if len(changes) == 0 {
				fmt.Fprintln(out, "streams up to date: nothing changed")
			}
			return nil
		},
	}
	apply.Flags().IntVar(&partitions, "partitions", 0, fmt.Sprintf("partitions of the counters stream (default: keep the current count; %d for a new stream)", schemas.DefaultPartitions))
	apply.Flags().IntVar(&replicas, "replicas", 0, "replicas of every stream (default: keep; 1 for a new stream)")
	apply.Flags().BoolVar(&memory, "memory", false, "store new streams in memory (tests; storage cannot change later)")
	apply.Flags().StringArrayVar(&maxAge, "max-age", nil, "STREAM=DURATION: set a stream's max age, e.g. RDMAWATCH_EVENTS=2160h (repeatable)")
	apply.Flags().StringArrayVar(&maxBytes, "max-bytes", nil, "STREAM=BYTES: set a stream's size limit, -1 for none (repeatable)")

	check := &cobra.Command{
		Use:   "check",
		Short: "Check that every stream exists with the subjects and partition transform the roles need",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := natsutil.ConnectWait(cmd.Context(), g.natsOptions("rdmawatch-streams-check"))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			var names []string
			for _, c := range schemas.Streams(schemas.StreamOptions{}) {
				names = append(names, c.Name)
			}
			if err := natsutil.CheckStreams(cmd.Context(), js, names...); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, n := range names {
				line, err := natsutil.StreamSummary(cmd.Context(), js, n)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, line)
			}
			fmt.Fprintln(out, "streams ok")
			return nil
		},
	}
	cmd.AddCommand(apply, check)
	return cmd
}

// streamSetting splits STREAM=VALUE and checks STREAM is an rdmawatch stream.
func streamSetting(flag, kv string) (string, string, error) {
	name, v, ok := strings.Cut(kv, "=")
	var known []string
	for _, c := range schemas.Streams(schemas.StreamOptions{}) {
		if c.Name == name {
			return name, v, nil
		}
		known = append(known, c.Name)
	}
	sort.Strings(known)
	if !ok {
		return "", "", fmt.Errorf("%s %q: want STREAM=VALUE, STREAM one of %s", flag, kv, strings.Join(known, ", "))
	}
	return "", "", fmt.Errorf("%s %q: unknown stream %q, want one of %s", flag, kv, name, strings.Join(known, ", "))
}
