package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/report"
)

// rangeFlags are the filters `query` and `postmortem` share.
type rangeFlags struct {
	from, to, node, device string
	port, limit            int
	event                  string
}

// apply sets the events query's filters.
func (k *eventKinds) apply(p *report.Params) {
	p.Type, p.Severity = strings.Join(k.types, ","), strings.Join(k.severities, ",")
	p.State, p.Layer = strings.Join(k.states, ","), strings.Join(k.layers, ",")
}

// withDataRange fills a range the user left open from what the database
// holds: a newcomer's first query should show the data, whenever it was
// recorded (a replayed trace's data time is not now).
func (r *rangeFlags) withDataRange(ctx context.Context, conn chdb.Conn, p *report.Params) error {
	if r.from != "" {
		return nil
	}
	from, to, ok, err := report.DataRange(ctx, conn)
	if err != nil || !ok {
		return err
	}
	p.From = from
	if r.to == "now" || r.to == "" {
		p.To = to
	}
	return nil
}

// hintEmpty says where the data is when a range the user gave holds none.
func hintEmpty(ctx context.Context, conn chdb.Conn, w io.Writer, p report.Params) {
	from, to, ok, err := report.DataRange(ctx, conn)
	if err != nil || !ok || (p.From.Before(to) && p.To.After(from)) {
		return
	}
	fmt.Fprintf(w, "no data in %s..%s; the database holds %s..%s: try --from %s --to %s\n",
		p.From.Format(time.RFC3339), p.To.Format(time.RFC3339), from.Format(time.RFC3339), to.Format(time.RFC3339),
		from.Format(time.RFC3339), to.Format(time.RFC3339))
}

func (r *rangeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.from, "from", "", "start of the time range: RFC 3339, a date, now, or a duration back from now (6h, 7d); default: the oldest data")
	f.StringVar(&r.to, "to", "now", "end of the time range (same forms as --from)")
	f.StringVar(&r.node, "node", "", "only this node (not from RDMAWATCH_NODE, the collector's node)")
	noEnv(f, "node")
	f.StringVar(&r.device, "device", "", "only this RDMA device (with --node)")
	f.IntVar(&r.port, "port", 0, "only this port (with --node and --device)")
}

// validate checks --from and --to.
func (r *rangeFlags) validate() error {
	_, err := r.params(time.Now().UTC())
	return err
}

func (r *rangeFlags) params(now time.Time) (report.Params, error) {
	from, err := parseTimeFlag("from", r.from, now)
	if err != nil {
		return report.Params{}, err
	}
	to, err := parseTimeFlag("to", r.to, now)
	if err != nil {
		return report.Params{}, err
	}
	return report.Params{From: from, To: to, Node: r.node, Device: r.device, Port: r.port, Limit: r.limit}, nil
}

// openRange connects to ClickHouse and turns the range flags into query
// parameters, an open --from filled from the data the database holds. The
// caller closes the connection.
func (r *rangeFlags) openRange(ctx context.Context, g *global) (driver.Conn, report.Params, error) {
	if err := g.requireClickHouse(); err != nil {
		return nil, report.Params{}, err
	}
	p, err := r.params(time.Now().UTC())
	if err != nil {
		return nil, report.Params{}, err
	}
	conn, err := chdb.Open(ctx, g.clickhouse, g.chOptions()...)
	if err != nil {
		return nil, report.Params{}, err
	}
	if err := r.withDataRange(ctx, conn, &p); err != nil {
		conn.Close()
		return nil, report.Params{}, err
	}
	return conn, p, nil
}

// queryFlags are the query command's flags.
type queryFlags struct {
	rf     rangeFlags
	ef     eventKinds
	format string
	by     string
	bucket string
	list   bool
	wide   bool
}

func (o *queryFlags) register(cmd *cobra.Command) {
	o.rf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.rf.event, "event", "", "incident id: the window around it and its subject port")
	f.IntVar(&o.rf.limit, "limit", 20, "rows, for the ranking queries (ber_trend, saturation_flaps); other queries refuse it")
	f.StringVar(&o.by, "by", "leaf", "trends: group by leaf, rack (the topology's \"racks\"), node or fabric")
	f.StringVar(&o.bucket, "bucket", "day", "trends: hour, day or week buckets")
	f.StringVar(&o.format, "format", "table", "output: table, json (one object per line) or csv")
	f.BoolVar(&o.list, "list", false, "list the shipped queries")
	f.BoolVar(&o.wide, "wide", false, "table: do not cut long text (summaries) to the terminal")
	o.ef.register(cmd, "events: ", "only incidents whose latest state is one of these (open, update, resolved)")
}

// validate checks the range and the output format; the filters a query
// takes are checked against it once NAME is known (refuseUnused).
func (o *queryFlags) validate() error {
	switch o.format {
	case report.FormatTable, report.FormatJSON, report.FormatCSV:
	default:
		return fmt.Errorf("--format %q: want %s, %s or %s", o.format, report.FormatTable, report.FormatJSON, report.FormatCSV)
	}
	if o.rf.limit < 0 {
		return fmt.Errorf("--limit %d: want 0 or more", o.rf.limit)
	}
	return o.rf.validate()
}

func newQueryCmd(g *global) *cobra.Command {
	var o queryFlags
	cmd := &cobra.Command{
		Use:   "query NAME --from T --to T [--node N --device D --port P] [--format table|json|csv]",
		Short: "Run one of the shipped ClickHouse queries (no NAME: list them)",
		Long: `query runs a query of schemas/ddl/queries against the ClickHouse
--clickhouse names. Without NAME (or with --list) it lists the queries and the
question each answers. A filter flag the query does not read is refused
by name (--list shows what each takes). --event ID sets --from/--to around that incident and
its subject as --node/--device/--port, for port_timeline.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || o.list {
				return listQueries(cmd.OutOrStdout())
			}
			return runQuery(cmd, g, args[0], o)
		},
	}
	o.register(cmd)
	g.validates(cmd, &o)
	return cmd
}

// listQueries prints the shipped queries and the question each answers.
func listQueries(out io.Writer) error {
	qs, err := chdb.Queries()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, q := range qs {
		var takes []string
		for _, f := range filterFlags {
			if q.Takes(f.param) {
				takes = append(takes, "--"+f.flag)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", q.Name, strings.Join(takes, " "), q.Question)
	}
	return tw.Flush()
}

// filterFlags maps each filter flag of `query` to the parameter it sets
// (--event sets the subject port, read through @node). --from and --to
// bound every query.
var filterFlags = []struct{ flag, param string }{
	{"node", "node"}, {"device", "device"}, {"port", "port"}, {"event", "node"},
	{"limit", "limit"}, {"by", "by"}, {"bucket", "bucket"}, {"type", "type"}, {"severity", "severity"}, {"state", "state"}, {"layer", "layer"},
}

// refuseUnused fails when a filter flag was given that query q does not
// read: silently ignored, `query storm_spread --type ber_drift` would print
// every storm as if filtered.
func refuseUnused(cmd *cobra.Command, q chdb.Query) error {
	var refused, takes []string
	for _, f := range filterFlags {
		if q.Takes(f.param) {
			takes = append(takes, "--"+f.flag)
		} else if cmd.Flags().Changed(f.flag) {
			refused = append(refused, "--"+f.flag)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("query %s does not take %s (it takes --from, --to%s)", q.Name, strings.Join(refused, ", "), prefixAll(", ", takes))
}

func prefixAll(sep string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return sep + strings.Join(items, sep)
}

func runQuery(cmd *cobra.Command, g *global, name string, o queryFlags) error {
	q, err := chdb.QueryByName(name)
	if err != nil {
		return err
	}
	if err := refuseUnused(cmd, q); err != nil {
		return err
	}
	conn, p, err := o.rf.openRange(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer conn.Close()
	o.ef.apply(&p)
	p.By, p.Bucket = o.by, o.bucket
	if o.rf.event != "" {
		w, err := report.EventWindow(cmd.Context(), conn, o.rf.event)
		if err != nil {
			return err
		}
		if o.rf.from == "" {
			p.From, p.To = w.From, w.To
		}
		if p.Node == "" {
			p.Node, p.Device, p.Port = w.Node, w.Device, w.Port
		}
	}
	res, err := report.RunQuery(cmd.Context(), conn, q, p)
	if err != nil {
		return err
	}
	if o.wide {
		res.MaxCell = -1
	}
	if len(res.Rows) == 0 {
		hintEmpty(cmd.Context(), conn, cmd.ErrOrStderr(), p)
	}
	return res.Write(cmd.OutOrStdout(), o.format)
}
