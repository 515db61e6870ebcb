package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func newStreamsCmd(g *global) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "streams apply|check",
		Short: "Create and check the JetStream streams (the admin step; roles only check)",
	}
	cmd.AddCommand(newStreamsApplyCmd(g), newStreamsCheckCmd(g))
	return cmd
}

// streamsApplyFlags are the flags of streams apply.
type streamsApplyFlags struct {
	partitions int
	replicas   int
	memory     bool
	maxAge     []string
	maxBytes   []string
	duplicates []string
}

func (s *streamsApplyFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&s.partitions, "partitions", 0, fmt.Sprintf("partitions of the counters stream (default: keep the current count; %d for a new stream)", schemas.DefaultPartitions))
	f.IntVar(&s.replicas, "replicas", 0, "replicas of every stream (default: keep; 1 for a new stream)")
	f.BoolVar(&s.memory, "memory", false, "store new streams in memory (tests; storage cannot change later)")
	f.StringArrayVar(&s.maxAge, "max-age", nil, "STREAM=DURATION: set a stream's max age, e.g. RDMAWATCH_EVENTS=2160h (repeatable)")
	f.StringArrayVar(&s.maxBytes, "max-bytes", nil, "STREAM=BYTES: set a stream's size limit, -1 for none (repeatable)")
	f.StringArrayVar(&s.duplicates, "duplicates", nil, "STREAM=DURATION: set a stream's duplicate window, how long a Nats-Msg-Id is remembered, e.g. RDMAWATCH_COUNTERS=10m (repeatable; at most the max age)")
}

// validate checks the counts and the per-stream limits.
func (s *streamsApplyFlags) validate() error {
	if s.partitions < 0 {
		return fmt.Errorf("--partitions %d: want 0 (keep the current count) or more", s.partitions)
	}
	if s.replicas < 0 {
		return fmt.Errorf("--replicas %d: want 0 (keep) or more", s.replicas)
	}
	_, err := s.options()
	return err
}

// options checks the per-stream limits and turns the flags into
// natsutil.ApplyOptions.
func (s *streamsApplyFlags) options() (natsutil.ApplyOptions, error) {
	o := natsutil.ApplyOptions{Partitions: s.partitions, Replicas: s.replicas, Memory: s.memory}
	var err error
	if o.MaxAge, err = streamSettings("--max-age", s.maxAge, "want a duration such as 720h", func(v string) (time.Duration, bool) {
		d, err := time.ParseDuration(v)
		return d, err == nil && d >= 0
	}); err != nil {
		return o, err
	}
	if o.MaxBytes, err = streamSettings("--max-bytes", s.maxBytes, "want a byte count, -1 for no limit", func(v string) (int64, bool) {
		b, err := strconv.ParseInt(v, 10, 64)
		return b, err == nil && b >= -1
	}); err != nil {
		return o, err
	}
	if o.Duplicates, err = streamSettings("--duplicates", s.duplicates, "want a positive duration such as 10m", func(v string) (time.Duration, bool) {
		d, err := time.ParseDuration(v)
		return d, err == nil && d > 0
	}); err != nil {
		return o, err
	}
	return o, nil
}

// streamSettings parses a repeatable STREAM=VALUE flag into a map by stream
// name; want says what a valid value looks like when parse refuses one.
func streamSettings[T any](flag string, kvs []string, want string, parse func(string) (T, bool)) (map[string]T, error) {
	m := make(map[string]T, len(kvs))
	for _, kv := range kvs {
		name, v, err := streamSetting(flag, kv)
		if err != nil {
			return nil, err
		}
		x, ok := parse(v)
		if !ok {
			return nil, fmt.Errorf("%s %s: %s", flag, kv, want)
		}
		m[name] = x
	}
	return m, nil
}

func newStreamsApplyCmd(g *global) *cobra.Command {
	var s streamsApplyFlags
	cmd := &cobra.Command{
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
			o, err := s.options()
			if err != nil {
				return err
			}
			nc, js, err := dialJS(cmd.Context(), g, "rdmawatch-streams-apply")
			if err != nil {
				return err
			}
			defer nc.Close()
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
	s.register(cmd)
	g.validates(cmd, &s)
	return cmd
}

func newStreamsCheckCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Check that every stream exists with the subjects and partition transform the roles need",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, js, err := dialJS(cmd.Context(), g, "rdmawatch-streams-check")
			if err != nil {
				return err
			}
			defer nc.Close()
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
