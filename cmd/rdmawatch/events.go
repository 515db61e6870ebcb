package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func newEventsCmd(g *global) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Read the incident events stream",
	}
	cmd.AddCommand(newEventsTailCmd(g))
	return cmd
}

// eventKinds are the filters on what an incident is that `events tail` and
// `query` share; an empty list matches all.
type eventKinds struct {
	types, severities, states, layers []string
}

// register defines --type, --severity, --state and --layer, each help text
// after prefix; states says what --state selects.
func (k *eventKinds) register(cmd *cobra.Command, prefix, states string) {
	fl := cmd.Flags()
	fl.StringSliceVar(&k.types, "type", nil, prefix+"only these incident types (pfc_storm, ber_drift, ...)")
	fl.StringSliceVar(&k.severities, "severity", nil, prefix+"only these severities (warning, critical)")
	fl.StringSliceVar(&k.states, "state", nil, prefix+states)
	fl.StringSliceVar(&k.layers, "layer", nil, prefix+"only these layers (physical, link_network, transport, application)")
}

// eventFilter selects events by their fields; an empty list matches all.
type eventFilter struct {
	eventKinds
	scopes, nodes []string
}

func (f *eventFilter) register(cmd *cobra.Command) {
	f.eventKinds.register(cmd, "", "only these states (open, update, resolved)")
	fl := cmd.Flags()
	fl.StringSliceVar(&f.scopes, "scope", nil, "only these scopes (port, node, fabric)")
	fl.StringSliceVar(&f.nodes, "node", nil, "only incidents about these nodes (not from RDMAWATCH_NODE, the collector's node)")
	noEnv(fl, "node")
}

func (f *eventFilter) match(ev *schemas.Event) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	return in(f.types, ev.Type) && in(f.severities, ev.Severity) && in(f.states, ev.State) &&
		in(f.layers, ev.Layer) && in(f.scopes, ev.Scope) && in(f.nodes, ev.Subject.Node)
}

type tailOptions struct {
	since  string
	json   bool
	follow bool
	filter eventFilter
}

func newEventsTailCmd(g *global) *cobra.Command {
	var o tailOptions
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow incident events as they are published, filtered, as text or JSON",
		Long: `tail prints incident state changes from the events stream: new ones by default,
or from --since (a duration such as 30m or 7d, an RFC 3339 time, or "all"). --since
is when the event was published, not its data time. With --json each line is the
same JSON object replay --events-out writes. With --follow=false it stops once it
has printed what the stream holds. Ctrl-C ends it cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.consumerConfig(time.Now())
			if err != nil {
				return err
			}
			nc, js, err := connectJS(cmd, g, "rdmawatch-events-tail", schemas.StreamEvents)
			if err != nil {
				return err
			}
			defer nc.Close()
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			err = tailEvents(cmd.Context(), js, cfg, o, w)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.since, "since", "", `start from this publish time: a duration back from now (30m, 7d), an RFC 3339 time, or "all" (default: new events only)`)
	f.BoolVar(&o.json, "json", false, "one JSON object per line, as replay --events-out writes")
	f.BoolVar(&o.follow, "follow", true, "keep waiting for new events; false: stop at the end of the stream")
	o.filter.register(cmd)
	g.validates(cmd, &o)
	return cmd
}

// validate checks --since.
func (o *tailOptions) validate() error {
	_, err := o.consumerConfig(time.Now())
	return err
}

func (o tailOptions) consumerConfig(now time.Time) (jetstream.OrderedConsumerConfig, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventsAllFilter}}
	switch {
	case o.since == "" && o.follow:
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	case o.since == "" || o.since == "all":
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	default:
		t, err := parseSince(o.since, now)
		if err != nil {
			return cfg, err
		}
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &t
	}
	return cfg, nil
}

// parseSince reads --since: the forms every time flag takes (parseTimeFlag).
func parseSince(s string, now time.Time) (time.Time, error) {
	if strings.TrimSpace(s) == "" {
		return time.Time{}, fmt.Errorf(`--since "": want a duration back from now (30m, 7d), an RFC 3339 time, a date, now or "all"`)
	}
	return parseTimeFlag("since", s, now)
}

// tailEvents prints matching events until ctx ends or, without follow, the
// stream has no more.
func tailEvents(ctx context.Context, js jetstream.JetStream, cfg jetstream.OrderedConsumerConfig, o tailOptions, w *bufio.Writer) error {
	cons, err := js.OrderedConsumer(ctx, schemas.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("events stream: %w", err)
	}
	if !o.follow {
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("events stream: %w", err)
		}
		if info.NumPending == 0 {
			return nil
		}
	}
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for msg := range batch.Messages() {
			if err := printEvent(w, msg, o); err != nil {
				return err
			}
			md, err := msg.Metadata()
			if err == nil && md.NumPending == 0 && !o.follow {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func printEvent(w io.Writer, msg jetstream.Msg, o tailOptions) error {
	ev, err := schemas.DecodeEvent(msg.Data())
	if err != nil {
		md, _ := msg.Metadata()
		seq := uint64(0)
		if md != nil {
			seq = md.Sequence.Stream
		}
		// Not on w: a --json reader must only ever see events there.
		fmt.Fprintf(os.Stderr, "rdmawatch: skipped message %d on %s: %v\n", seq, msg.Subject(), err)
		return nil
	}
	if !o.filter.match(ev) {
		return nil
	}
	if o.json {
		line, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("event %s as JSON: %w", ev.MsgID(), err)
		}
		_, err = fmt.Fprintf(w, "%s\n", line)
		return err
	}
	_, err = fmt.Fprintln(w, formatEvent(ev))
	if err == nil && ev.State != schemas.StateResolved {
		if e := formatEvidence(ev); e != "" {
			_, err = fmt.Fprintln(w, "    "+e)
		}
	}
	return err
}
