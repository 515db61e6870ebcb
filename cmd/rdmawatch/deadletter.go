package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/deadletter"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func newDeadLetterCmd(g *global) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deadletter ls|show|redrive|metrics",
		Short: "List, read and redrive the messages the roles refused (" + schemas.StreamDeadLetter + ")",
		Long: `deadletter reads the dead-letter stream, where a role puts a message it cannot use
with the reason in headers: ls lists them, show decodes one, redrive publishes
them again to the subject they came from, metrics prints the stream's depth for
Prometheus. It connects as the NATS admin (inbox _INBOX_rdmawatch.admin).`,
	}
	cmd.AddCommand(newDeadLetterLsCmd(g), newDeadLetterShowCmd(g), newDeadLetterRedriveCmd(g), newDeadLetterMetricsCmd(g))
	return cmd
}

// deadLetterFilter holds the flags that select dead letters (ls, redrive
// --all-matching).
type deadLetterFilter struct {
	roles, streams []string
	reason         string
	since, until   string
	limit          int
}

func (d *deadLetterFilter) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&d.roles, "role", nil, "only letters of these roles ("+strings.Join(deadletter.Roles, ", ")+")")
	f.StringSliceVar(&d.streams, "stream", nil, "only letters from these streams (RDMAWATCH_COUNTERS or counters, events, inventory)")
	f.StringVar(&d.reason, "reason", "", "only letters whose reason contains this text (any case)")
	f.StringVar(&d.since, "since", "", "only letters stored at or after this time: a duration back from now (30m, 7d), an RFC 3339 time or a date")
	f.StringVar(&d.until, "until", "", "only letters stored at or before this time, as --since")
	f.IntVar(&d.limit, "limit", 0, "at most this many letters, oldest first (0: all)")
}

// validate checks the selection: filter without a use of its result.
func (d *deadLetterFilter) validate() error {
	_, err := d.filter(time.Now())
	return err
}

// filter checks the flags, before anything connects.
func (d *deadLetterFilter) filter(now time.Time) (deadletter.Filter, error) {
	f := deadletter.Filter{Roles: d.roles, Reason: d.reason, Limit: d.limit}
	for _, s := range d.streams {
		name, err := deadletter.StreamName(s)
		if err != nil {
			return f, fmt.Errorf("--stream: %w", err)
		}
		f.Streams = append(f.Streams, name)
	}
	var err error
	if f.Since, err = parseTimeFlag("since", d.since, now); err != nil {
		return f, err
	}
	if f.Until, err = parseTimeFlag("until", d.until, now); err != nil {
		return f, err
	}
	if d.limit < 0 {
		return f, fmt.Errorf("--limit %d: want 0 (all) or more", d.limit)
	}
	for _, r := range d.roles {
		if err := (deadletter.Filter{Roles: []string{r}}).Check(); err != nil {
			return f, fmt.Errorf("--role: %w", err)
		}
	}
	if err := f.Check(); err != nil {
		return f, fmt.Errorf("--since %s, --until %s: %w", d.since, d.until, err)
	}
	return f, nil
}

// openDeadLetters dials NATS as the admin and opens the dead-letter stream;
// the caller closes the connection.
func openDeadLetters(cmd *cobra.Command, g *global, name string) (*nats.Conn, *deadletter.Reader, error) {
	nc, js, err := dialJS(cmd.Context(), g, name)
	if err != nil {
		return nil, nil, err
	}
	if err := natsutil.CheckStreams(cmd.Context(), js, schemas.StreamDeadLetter); err != nil {
		nc.Close()
		return nil, nil, err
	}
	r, err := deadletter.Open(cmd.Context(), js)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, r, nil
}

func newDeadLetterLsCmd(g *global) *cobra.Command {
	var (
		sel    deadLetterFilter
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "One line per dead letter: sequence, time, role, origin, size, reason",
		Long: `ls prints one line per dead letter, oldest first: its sequence in
RDMAWATCH_DEADLETTER (what show and redrive take), when the role refused it,
the role, the stream and subject it came from, its payload's size and the
reason. Only headers are read. --json prints one JSON object per line instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := sel.filter(time.Now())
			if err != nil {
				return err
			}
			nc, r, err := openDeadLetters(cmd, g, "rdmawatch-deadletter-ls")
			if err != nil {
				return err
			}
			defer nc.Close()
			return listDeadLetters(cmd, r, f, asJSON, cmd.OutOrStdout())
		},
	}
	sel.register(cmd)
	g.validates(cmd, &sel)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func listDeadLetters(cmd *cobra.Command, r *deadletter.Reader, f deadletter.Filter, asJSON bool, out io.Writer) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	if asJSON {
		enc := json.NewEncoder(w)
		return r.List(cmd.Context(), f, func(l deadletter.Letter) error { return enc.Encode(l) })
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	n := 0
	err := r.List(cmd.Context(), f, func(l deadletter.Letter) error {
		if n == 0 {
			fmt.Fprintln(tw, "SEQ\tTIME\tROLE\tSTREAM/SUBJECT\tSIZE\tREASON")
		}
		n++
		_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s/%s\t%d\t%s\n", l.Seq, l.Time.Format(time.RFC3339Nano),
			printable(l.Role), printable(l.Stream), printable(l.Subject), l.Size, printable(l.Reason))
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(tw, "no dead letters match")
	}
	return tw.Flush()
}

// printable keeps a header value, which a refused message may have put
// there, from driving the terminal: anything not printable is quoted.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

// parseSeqs reads the SEQ arguments.
func parseSeqs(args []string) ([]uint64, error) {
	out := make([]uint64, 0, len(args))
	for _, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("dead letter %q: want its sequence, a positive integer (rdmawatch deadletter ls)", a)
		}
		out = append(out, n)
	}
	return out, nil
}

func newDeadLetterShowCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "show SEQ",
		Short: "Print a dead letter's headers and its payload decoded",
		Long: `show prints a dead letter's headers and its payload decoded with the decoder of
the stream it came from: a counters batch or an inventory as JSON, an event as
the JSON object events tail --json prints. A payload that does not decode (most
letters are there for that) is shown as the decode error and a hex dump of its
first 512 bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seqs, err := parseSeqs(args)
			if err != nil {
				return err
			}
			nc, r, err := openDeadLetters(cmd, g, "rdmawatch-deadletter-show")
			if err != nil {
				return err
			}
			defer nc.Close()
			l, err := r.Get(cmd.Context(), seqs[0])
			if err != nil {
				return err
			}
			return showDeadLetter(cmd.OutOrStdout(), l)
		},
	}
}

// hexDumpMax is how much of an undecodable payload show dumps.
const hexDumpMax = 512

func showDeadLetter(out io.Writer, l deadletter.Letter) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "dead letter %d on %s, stored %s\n", l.Seq, l.DeadSubject, l.Time.Format(time.RFC3339Nano))
	keys := make([]string, 0, len(l.Header))
	for k := range l.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "headers:")
	for _, k := range keys {
		for _, v := range l.Header.Values(k) {
			fmt.Fprintf(w, "  %s: %s\n", k, printable(v))
		}
	}
	p := deadletter.Decode(l)
	switch {
	case p.Err != nil:
		what := "anything rdmawatch reads"
		switch {
		case strings.HasPrefix(p.Kind, "e") || strings.HasPrefix(p.Kind, "i"):
			what = "an " + p.Kind
		case p.Kind != "":
			what = "a " + p.Kind
		}
		fmt.Fprintf(w, "payload: %d bytes; it does not decode as %s: %s\n", len(l.Data), what, printable(p.Err.Error()))
		dump := l.Data
		if len(dump) > hexDumpMax {
			dump = dump[:hexDumpMax]
		}
		w.WriteString(hex.Dump(dump))
		if rest := len(l.Data) - len(dump); rest > 0 {
			fmt.Fprintf(w, "... %d more bytes\n", rest)
		}
	default:
		b, err := json.MarshalIndent(p.Value, "", "  ")
		if err != nil {
			return fmt.Errorf("dead letter %d: %s as JSON: %w", l.Seq, p.Kind, err)
		}
		fmt.Fprintf(w, "payload: %d bytes, %s:\n%s\n", len(l.Data), p.Kind, b)
	}
	return w.Flush()
}

func newDeadLetterRedriveCmd(g *global) *cobra.Command {
	var (
		sel         deadLetterFilter
		allMatching bool
		dryRun      bool
	)
	cmd := &cobra.Command{
		Use:   "redrive SEQ... | --all-matching FILTERS",
		Short: "Publish dead letters again to the subject they came from, then delete them",
		Long: `redrive publishes each dead letter's payload, untouched, to the subject it was
refused on (a counters batch to rdmawatch.counters.<node>, partitioned anew by
the stream), and deletes the letter once the stream has acknowledged the copy;
a letter whose publish fails is kept. The copy's Nats-Msg-Id is
redrive/<stream>/<original sequence>, so a repeat within the stream's duplicate
window (10 minutes) stores no second copy. A letter whose headers name a
subject outside rdmawatch's counters, events and inventory streams is refused.

The copy goes to every consumer of its stream, not only the role that refused
it: redrive once the cause is fixed (a sink's ClickHouse refusals, an alert
target that answered 4xx), or the role refuses it again into a new letter. A
counters batch only a processor refused was stored by the sink, which would
insert the copy again: redrive such a letter only when the sink refused the
same message too (ls --stream counters: same stream_seq). Events go again to
every alert target.

Either name the letters (SEQ as ls prints it) or select them with
--all-matching and the filters of ls; --dry-run says what would be done.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				seqs []uint64
				f    deadletter.Filter
				err  error
			)
			filterSet := false
			for _, name := range []string{"role", "stream", "reason", "since", "until", "limit"} {
				filterSet = filterSet || cmd.Flags().Changed(name)
			}
			switch {
			case allMatching && len(args) > 0:
				return fmt.Errorf("redrive: give dead letters by SEQ or --all-matching with filters, not both")
			case allMatching:
				if f, err = sel.filter(time.Now()); err != nil {
					return err
				}
				if !f.Narrowed() {
					return fmt.Errorf("redrive --all-matching: name at least one of --role, --stream, --reason, --since, --until (every dead letter at once is rarely meant)")
				}
			case filterSet:
				return fmt.Errorf("redrive: --role, --stream, --reason, --since, --until and --limit select with --all-matching only")
			case len(args) == 0:
				return fmt.Errorf("redrive: name dead letters by SEQ (rdmawatch deadletter ls) or use --all-matching with filters")
			default:
				if seqs, err = parseSeqs(args); err != nil {
					return err
				}
			}
			nc, r, err := openDeadLetters(cmd, g, "rdmawatch-deadletter-redrive")
			if err != nil {
				return err
			}
			defer nc.Close()
			if allMatching {
				if err := r.List(cmd.Context(), f, func(l deadletter.Letter) error {
					seqs = append(seqs, l.Seq)
					return nil
				}); err != nil {
					return err
				}
			}
			return redriveDeadLetters(cmd, r, seqs, dryRun, cmd.OutOrStdout())
		},
	}
	sel.register(cmd)
	g.validates(cmd, &sel)
	fl := cmd.Flags()
	fl.BoolVar(&allMatching, "all-matching", false, "redrive every dead letter the filters select")
	fl.BoolVar(&dryRun, "dry-run", false, "check and print what would be redriven; publish and delete nothing")
	return cmd
}

// redriveDeadLetters redrives seqs one by one: one that fails is reported
// and the others still go; the command fails if any did.
func redriveDeadLetters(cmd *cobra.Command, r *deadletter.Reader, seqs []uint64, dryRun bool, out io.Writer) error {
	failed := 0
	for _, seq := range seqs {
		o, err := r.Redrive(cmd.Context(), seq, dryRun)
		if err != nil {
			if cmd.Context().Err() != nil {
				return err
			}
			failed++
			fmt.Fprintln(cmd.ErrOrStderr(), "rdmawatch:", printable(err.Error()))
			continue
		}
		origin := fmt.Sprintf("%s %s seq %d", printable(o.Letter.Role), printable(o.Letter.Stream), o.Letter.StreamSeq)
		switch {
		case dryRun:
			fmt.Fprintf(out, "would redrive %d (%s) to %s as %s\n", seq, origin, o.Target, o.MsgID)
		case o.Duplicate:
			fmt.Fprintf(out, "redriven %d (%s) to %s: already there (%s seq %d, an earlier redrive); dead letter deleted\n", seq, origin, o.Target, o.Letter.Stream, o.Stored)
		default:
			fmt.Fprintf(out, "redriven %d (%s) to %s: %s seq %d; dead letter deleted\n", seq, origin, o.Target, o.Letter.Stream, o.Stored)
		}
	}
	if len(seqs) == 0 {
		fmt.Fprintln(out, "no dead letters match")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letters not redriven (above)", failed, len(seqs))
	}
	return nil
}

// deadLetterMetricsFlags are the settings of deadletter metrics.
type deadLetterMetricsFlags struct{ textfile string }

// validate checks --textfile: node_exporter reads only *.prom files.
func (o *deadLetterMetricsFlags) validate() error {
	if o.textfile != "" && !strings.HasSuffix(o.textfile, ".prom") {
		return fmt.Errorf("--textfile %q: node_exporter's textfile collector reads only files ending in .prom", o.textfile)
	}
	return nil
}

func newDeadLetterMetricsCmd(g *global) *cobra.Command {
	var o deadLetterMetricsFlags
	cmd := &cobra.Command{
		Use:   "metrics [--textfile FILE.prom]",
		Short: "Print the dead-letter stream's depth in the Prometheus text format",
		Long: `metrics prints ` + deadletter.MetricMessages + `{role,stream} (letters per role
and stream they came from) and ` + deadletter.MetricBytes + ` (the stream's size) in the
Prometheus text format. With --textfile it writes them to that file instead,
atomically, for node_exporter's textfile collector: run it from a timer every
minute or so. No role exports these gauges.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			textfile := o.textfile
			nc, r, err := openDeadLetters(cmd, g, "rdmawatch-deadletter-metrics")
			if err != nil {
				return err
			}
			defer nc.Close()
			reg := prometheus.NewRegistry()
			reg.MustRegister(deadletter.DepthCollector(r))
			if textfile != "" {
				if err := prometheus.WriteToTextfile(textfile, reg); err != nil {
					return fmt.Errorf("--textfile %s: %w", textfile, err)
				}
				return nil
			}
			mfs, err := reg.Gather()
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			for _, mf := range mfs {
				if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
					return err
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&o.textfile, "textfile", "", "write to this file (ending in .prom) atomically instead of printing")
	g.validates(cmd, &o)
	return cmd
}
