package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// The plots of receive_starvation, retransmissions, completion_errors and
// config_mismatch. Like the storm, BER and CNP plots, each draws the
// counters its detector judged (docs/formats.md, "Event types by layer"),
// so the plot alone shows why the incident opened: the default panels
// (throughput, pauses, BER, ECN) say nothing about buffers, sequence
// errors, failed completions or settings.
//
// A series the port does not have is not drawn and has no legend entry: on
// real hosts a counter that does not apply is absent, not zero (mlx4 has no
// out_of_buffer, InfiniBand no rx_discards_phy), and a flat line at 0 for
// it would claim "counted, none" where nothing was counted. port_samples
// reads 0 alike for a counter that is absent and one that did not move
// (named columns are 0 when not read; extra_* keeps only non-zero deltas),
// so a counter is taken as present when it moved in the window or the
// collector listed it in a baseline (the FlagFirst reading every counter
// gets when first read).

// Counters per type, in legend order; mlx5's names first, then mlx4's
// (processor/counterids_mlx4.go). A port has one set or the other.
var (
	starvationDrops = []string{"out_of_buffer", "rx_out_of_buffer", "rx_discards_phy", "rq_num_rnr", "rq_num_udsdprd"}
	starvationRNR   = []string{"rnr_nak_retry_err", "sq_num_rnr", "sq_num_rree"}
	retransOOS      = []string{"out_of_sequence", "duplicate_request", "rq_num_oos", "rq_num_dup"}
	retransNAKs     = []string{"packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err", "sq_num_oos", "sq_num_to"}
	completionErrs  = []string{"req_cqe_error", "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
		"resp_local_length_error", "resp_remote_access_errors",
		"sq_num_lle", "rq_num_lle", "sq_num_lqpoe", "rq_num_lqpoe", "sq_num_lpe", "rq_num_lpe", "sq_num_mwbe", "sq_num_bre",
		"sq_num_rire", "rq_num_rire", "sq_num_rae", "rq_num_rae", "sq_num_roe", "sq_num_tree", "sq_num_rree"}
	// Flushes follow other errors (a QP in error flushes its queue): drawn
	// dashed, as the evidence they are.
	completionFlushes = []string{"req_cqe_flush_error", "resp_cqe_flush_error", "sq_num_wrfe", "rq_num_wrfe"}
)

// kindColors gives each counter of a panel its own colour, in legend order.
var kindColors = []string{"#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

// maxPeerSeries bounds the series of other ports in one panel: a legend
// holds about ten entries beside a panel.
const maxPeerSeries = 8

// retransCriticalShare is retransmissions' critical level (one received
// packet in a hundred out of sequence; processor/detect/retransmissions).
const retransCriticalShare = 1e-2

// typePlot sets plot's panels for the four types, on the subject's sample
// times (s): its own evidence first, throughput last as context.
func typePlot(ctx context.Context, conn chdb.Conn, inc *Incident, plot *Plot, s *series, throughput, pauses Panel, fromMs, toMs int64) error {
	ev := evidenceOf(inc.Evidence)
	switch inc.Type {
	case "receive_starvation":
		return starvationPlot(ctx, conn, inc, ev, plot, s, throughput, pauses, fromMs, toMs)
	case "retransmissions":
		return retransPlot(ctx, conn, inc, ev, plot, s, throughput, fromMs, toMs)
	case "completion_errors":
		return completionPlot(ctx, conn, inc, ev, plot, s, throughput, fromMs, toMs)
	case "config_mismatch":
		return configPlot(ctx, conn, inc, ev, plot, throughput, fromMs, toMs)
	}
	return nil
}

// starvationPlot: the drops of the receive queue and NIC buffer per
// second, the senders' RNR retries run out (evidence "peers"), and the
// pauses the port sends when its drops grow into a storm.
func starvationPlot(ctx context.Context, conn chdb.Conn, inc *Incident, ev map[string]any, plot *Plot, s *series, throughput, pauses Panel, fromMs, toMs int64) error {
	own, err := portCounters(ctx, conn, portRef{inc.Node, inc.Device, inc.Port}, append(append([]string(nil), starvationDrops...), starvationRNR...), fromMs, toMs)
	if err != nil {
		return err
	}
	drops := Panel{Title: "Packets dropped on receive: no posted buffer, NIC buffer full", Unit: "per s"}
	for i, c := range starvationDrops {
		if v, ok := own.perS(c, s.times); ok {
			drops.Series = append(drops.Series, Series{Name: c, Color: kindColors[i%len(kindColors)], Values: v})
		}
	}
	plot.Panels = []Panel{drops}
	rnr := Panel{Title: "RNR retries of the senders (peers in the evidence)", Unit: "per s"}
	// A secondary-only incident's subject is a sender: its own RNR counters
	// are the evidence.
	for i, c := range starvationRNR {
		if v, ok := own.perS(c, s.times); ok && hasValues(v) {
			rnr.Series = append(rnr.Series, Series{Name: "this port: " + c, Color: kindColors[(i+5)%len(kindColors)], Values: v})
		}
	}
	peers, err := peerSeries(ctx, conn, portsOf(stringList(ev["peers"])), starvationRNR, s.times, fromMs, toMs)
	if err != nil {
		return err
	}
	rnr.Series = append(rnr.Series, peers...)
	if len(rnr.Series) > 0 {
		plot.Panels = append(plot.Panels, rnr)
	}
	if hasValues(s.txPause) {
		pauses.Series = pauses.Series[:1] // the pauses the starving port sends
		plot.Panels = append(plot.Panels, pauses)
	}
	plot.Panels = append(plot.Panels, throughput)
	return nil
}

// retransPlot: the subject's out-of-sequence (and duplicate) packets per
// received packet against its usual share, and the NAK sequence errors
// and ACK timeouts its senders count per second (evidence "peers", or the
// ports of its fabric whose counters moved).
func retransPlot(ctx context.Context, conn chdb.Conn, inc *Incident, ev map[string]any, plot *Plot, s *series, throughput Panel, fromMs, toMs int64) error {
	own, err := portCounters(ctx, conn, portRef{inc.Node, inc.Device, inc.Port}, append(append([]string(nil), retransOOS...), retransNAKs...), fromMs, toMs)
	if err != nil {
		return err
	}
	// A log axis: the port's usual share (1e-7 to 1e-5) and a loss (1e-4
	// to 1e-2) are decades apart, and the rise against the usual is what
	// opened the incident.
	share := Panel{Title: "Out of sequence per received packet", Unit: "share", Log: true}
	peak := 0.0
	for i, c := range retransOOS {
		v, ok := own.perPacket(c, s.times)
		if !ok {
			continue
		}
		name := c
		if !hasValues(v) {
			name += " (none counted)" // the port has it; 0 has no place on a log axis
		}
		share.Series = append(share.Series, Series{Name: name, Color: kindColors[i%len(kindColors)], Values: v})
		for _, x := range v {
			if !math.IsNaN(x) {
				peak = math.Max(peak, x)
			}
		}
	}
	if b, ok := ev["baseline"].(float64); ok && b > 0 && len(share.Series) > 0 {
		share.Levels = append(share.Levels, Level{Name: "usual share " + strconv.FormatFloat(b, 'g', 2, 64), Value: b, Color: "#7f7f7f"})
	}
	if peak >= retransCriticalShare/100 {
		// Drawn only where the data comes within two decades of it: more
		// decades would squeeze the rise the plot is there to show.
		share.Levels = append(share.Levels, Level{Name: "critical 1e-2", Value: retransCriticalShare, Color: colorCritical})
	}
	plot.Panels = []Panel{share}

	naks := Panel{Title: "NAK sequence errors and ACK timeouts of the senders", Unit: "per s"}
	for i, c := range retransNAKs {
		if v, ok := own.perS(c, s.times); ok && hasValues(v) {
			naks.Series = append(naks.Series, Series{Name: "this port: " + c, Color: kindColors[(i+5)%len(kindColors)], Values: v})
		}
	}
	peers := portsOf(stringList(ev["peers"]))
	if len(peers) == 0 {
		naks.Title = "NAK sequence errors and ACK timeouts of the fabric's ports (no peers in the evidence)"
		if peers, err = movedPorts(ctx, conn, inc, retransNAKs, fromMs, toMs); err != nil {
			return err
		}
	}
	ps, err := peerSeries(ctx, conn, peers, retransNAKs, s.times, fromMs, toMs)
	if err != nil {
		return err
	}
	naks.Series = append(naks.Series, ps...)
	if len(naks.Series) > 0 {
		plot.Panels = append(plot.Panels, naks)
	}
	plot.Panels = append(plot.Panels, throughput)
	return nil
}

// completionPlot: the subject's failed completions by kind (requester
// req_*/sq_*, or responder resp_*/rq_* when no requester shows errors),
// against the affected ports' (the responders counting the same
// requests), flushes dashed.
func completionPlot(ctx context.Context, conn chdb.Conn, inc *Incident, ev map[string]any, plot *Plot, s *series, throughput Panel, fromMs, toMs int64) error {
	names := append(append([]string(nil), completionErrs...), completionFlushes...)
	own, err := portCounters(ctx, conn, portRef{inc.Node, inc.Device, inc.Port}, names, fromMs, toMs)
	if err != nil {
		return err
	}
	role, _ := ev["role"].(string)
	if role == "" {
		role = "subject"
	}
	mine := Panel{Title: fmt.Sprintf("Failed completions of %s/%s/%d (%s), by kind", inc.Node, inc.Device, inc.Port, role), Unit: "per s"}
	for _, c := range names {
		if v, ok := own.perS(c, s.times); ok {
			// Coloured in the order drawn: of some 25 kinds a port has a few.
			mine.Series = append(mine.Series, Series{Name: c, Color: kindColors[len(mine.Series)%len(kindColors)], Values: v, Dashed: isFlush(c)})
		}
	}
	plot.Panels = []Panel{mine}
	affected, err := affectedPorts(ctx, conn, inc.ID)
	if err != nil {
		return err
	}
	other := "responders"
	if role == "responder" {
		other = "other responders"
	}
	theirs := Panel{Title: fmt.Sprintf("Failed completions of the affected ports (%s), by kind", other), Unit: "per s"}
	if theirs.Series, err = peerSeries(ctx, conn, affected, names, s.times, fromMs, toMs); err != nil {
		return err
	}
	if len(theirs.Series) > 0 {
		plot.Panels = append(plot.Panels, theirs)
	}
	plot.Panels = append(plot.Panels, throughput)
	return nil
}

func isFlush(c string) bool { return strings.Contains(c, "flush") || strings.HasSuffix(c, "_wrfe") }

// portRef is one port.
type portRef struct {
	node, device string
	port         uint16
}

func (p portRef) String() string { return fmt.Sprintf("%s/%s/%d", p.node, p.device, p.port) }

// portsOf parses "node/device/port" names (evidence "peers").
func portsOf(names []string) []portRef {
	var out []portRef
	for _, n := range names {
		i := strings.LastIndex(n, "/")
		j := strings.Index(n, "/")
		if i <= j || j <= 0 {
			continue
		}
		p, err := strconv.ParseUint(n[i+1:], 10, 16)
		if err != nil {
			continue
		}
		out = append(out, portRef{n[:j], n[j+1 : i], uint16(p)})
	}
	return out
}

// counterSeries are the deltas of some counters of one port, per sample.
type counterSeries struct {
	times     []time.Time
	intervalS []float64
	delta     map[string][]float64
	rcvPkts   []float64 // NaN where port_rcv_packets is no denominator
	present   map[string]bool
}

// portCounters reads the named counters' deltas of one port in the
// window, and which of them the port has (see the top of this file).
func portCounters(ctx context.Context, conn chdb.Conn, p portRef, names []string, fromMs, toMs int64) (*counterSeries, error) {
	args := []any{ch.Named("node", p.node), ch.Named("device", p.device), ch.Named("port", int(p.port)),
		ch.Named("from_ms", fromMs), ch.Named("to_ms", toMs), ch.Named("names", names)}
	// A pinned, reset or held port_rcv_packets says nothing of the packets
	// received (processor/detect/judged): such a sample has no share.
	rows, err := conn.Query(ctx, `SELECT time_ms, interval_ms, `+deltasOf(names)+`,
    rcv_packets, toUInt8(has(saturated, 'port_rcv_packets')
        OR bitAnd(flagged_flags[indexOf(flagged_name, 'port_rcv_packets')], 1 + 2 + 8 + 16) != 0)
FROM port_samples FINAL
WHERE node = @node AND device = @device AND port = @port AND time_ms >= @from_ms AND time_ms <= @to_ms AND first = 0
ORDER BY time_ms`, args...)
	if err != nil {
		return nil, fmt.Errorf("postmortem: counters of %s: %w", p, err)
	}
	defer rows.Close()
	c := &counterSeries{delta: map[string][]float64{}, present: map[string]bool{}}
	for rows.Next() {
		var (
			tms, ims int64
			d        []uint64
			rcv      uint64
			bad      uint8
		)
		if err := rows.Scan(&tms, &ims, &d, &rcv, &bad); err != nil {
			return nil, fmt.Errorf("postmortem: counters of %s: %w", p, err)
		}
		c.times = append(c.times, time.UnixMilli(tms).UTC())
		c.intervalS = append(c.intervalS, float64(ims)/1000)
		for k, n := range names {
			var v uint64
			if k < len(d) {
				v = d[k]
			}
			c.delta[n] = append(c.delta[n], float64(v))
			if v != 0 {
				c.present[n] = true
			}
		}
		r := float64(rcv)
		if bad != 0 || rcv == 0 {
			r = math.NaN()
		}
		c.rcvPkts = append(c.rcvPkts, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postmortem: counters of %s: %w", p, err)
	}
	rows.Close()
	// Counters listed in a baseline (flag 1, FlagFirst) up to the window's
	// end: the port has them even if they never moved. Not FINAL: a
	// duplicate row lists the same names.
	var listed []string
	if err := conn.QueryRow(ctx, `SELECT groupUniqArrayArray(arrayFilter((n, f) -> bitAnd(f, 1) != 0 AND has(@names, n), flagged_name, flagged_flags))
FROM port_samples
WHERE node = @node AND device = @device AND port = @port AND time_ms <= @to_ms AND notEmpty(flagged_id)`, args...).Scan(&listed); err != nil {
		return nil, fmt.Errorf("postmortem: counters listed by %s: %w", p, err)
	}
	for _, n := range listed {
		c.present[n] = true
	}
	return c, nil
}

// deltasOf is the SQL array of the named counters' deltas of a
// port_samples row. Spelt out per name: ClickHouse 18.16 does not resolve
// an ALIAS column (delta_name, delta_value) inside a lambda.
func deltasOf(names []string) string {
	var b strings.Builder
	b.WriteString("[")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		// Counter names are this file's constants; quoted all the same.
		fmt.Fprintf(&b, "delta_value[indexOf(delta_name, '%s')]", strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(n))
	}
	b.WriteString("]")
	return b.String()
}

// perS is the counter's rate per second on times, ok false when the port
// does not have it.
func (c *counterSeries) perS(name string, times []time.Time) ([]float64, bool) {
	if !c.present[name] {
		return nil, false
	}
	d := c.delta[name]
	v := make([]float64, len(d))
	for i := range d {
		v[i] = math.NaN()
		if c.intervalS[i] > 0 {
			v[i] = d[i] / c.intervalS[i]
		}
	}
	return resample(c.times, v, times), true
}

// perPacket is the counter's delta per received packet on times.
func (c *counterSeries) perPacket(name string, times []time.Time) ([]float64, bool) {
	if !c.present[name] {
		return nil, false
	}
	d := c.delta[name]
	v := make([]float64, len(d))
	for i := range d {
		v[i] = d[i] / c.rcvPkts[i] // NaN where the denominator is
	}
	return resample(c.times, v, times), true
}

// resample puts values taken at src onto times: the nearest sample at or
// before each time, within twice the axis' step there; NaN (a gap)
// otherwise. Other ports' samples do not fall on the subject's times.
func resample(src []time.Time, values []float64, times []time.Time) []float64 {
	out := make([]float64, len(times))
	j := 0
	for i, t := range times {
		out[i] = math.NaN()
		for j+1 < len(src) && !src[j+1].After(t) {
			j++
		}
		if j >= len(src) || src[j].After(t) {
			continue
		}
		var step time.Duration
		switch {
		case i > 0:
			step = t.Sub(times[i-1])
		case len(times) > 1:
			step = times[1].Sub(t)
		}
		if t.Sub(src[j]) <= 2*step {
			out[i] = values[j]
		}
	}
	return out
}

// peerSeries draws the counters other ports have, one series per port and
// counter that moved in the window (a counter that stayed at 0 on every
// peer is left out: with several ports a flat line per port says nothing
// and crowds the legend), at most maxPeerSeries.
func peerSeries(ctx context.Context, conn chdb.Conn, ports []portRef, names []string, times []time.Time, fromMs, toMs int64) ([]Series, error) {
	label := shortNames(ports)
	var out []Series
	more := 0
	k := 0
	for i, p := range ports {
		c, err := portCounters(ctx, conn, p, names, fromMs, toMs)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			v, ok := c.perS(n, times)
			if !ok || !hasValues(v) {
				continue
			}
			if len(out) >= maxPeerSeries {
				more++
				continue
			}
			out = append(out, Series{Name: fitLegend(label[i], n), Color: victimColors[k%len(victimColors)], Values: v, Dashed: true})
			k++
		}
	}
	if more > 0 {
		out = append(out, Series{Name: fmt.Sprintf("(+%d more series)", more), Color: "#ffffff"})
	}
	return out, nil
}

// legendText is the room for a legend entry's text, as the plot's font
// measures it: the legend column less the gap and the line sample before
// the text (drawLegend), less a fifth for viewers without Liberation Serif,
// whose fallback (DejaVu Serif under rsvg-convert) is about 25% wider.
const legendText = (legendWidth - 14 - 24) * 0.8

// fitLegend names a port's counter within the legend's width: the
// counter's "_errors"/"_error" shortened to "_err" first (the kind stays
// readable), then the port's name cut with an ellipsis.
func fitLegend(port, counter string) string {
	sty := textStyle(textFont, nil)
	fits := func(s string) bool { return sty.Width(s) <= legendText }
	label := port + ": " + counter
	if fits(label) {
		return label
	}
	for _, suf := range []string{"_errors", "_error"} {
		if strings.HasSuffix(counter, suf) {
			counter = strings.TrimSuffix(counter, suf) + "_err"
			break
		}
	}
	r := []rune(port)
	for label = port + ": " + counter; !fits(label) && len(r) > 1; label = string(r) + "…: " + counter {
		r = r[:len(r)-1]
	}
	return label
}

// shortNames names ports by node where that is unique among them (the
// legend is 200 points wide), else by node/device/port.
func shortNames(ports []portRef) []string {
	count := map[string]int{}
	for _, p := range ports {
		count[p.node]++
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = p.node
		if count[p.node] > 1 {
			out[i] = p.String()
		}
	}
	return out
}

// affectedPorts are the event's affected ports (completion_errors: the
// responders of the subject's failing requests).
func affectedPorts(ctx context.Context, conn chdb.Conn, id string) ([]portRef, error) {
	rows, err := conn.Query(ctx, `SELECT affected_node, affected_device, affected_port FROM events_latest WHERE id = @id LIMIT 1`, ch.Named("id", id))
	if err != nil {
		return nil, fmt.Errorf("postmortem: ports affected by %s: %w", id, err)
	}
	defer rows.Close()
	var out []portRef
	for rows.Next() {
		var (
			nodes, devices []string
			ports          []uint16
		)
		if err := rows.Scan(&nodes, &devices, &ports); err != nil {
			return nil, fmt.Errorf("postmortem: ports affected by %s: %w", id, err)
		}
		for i := range min(len(nodes), len(devices), len(ports)) {
			out = append(out, portRef{nodes[i], devices[i], ports[i]})
		}
	}
	return out, rows.Err()
}

// movedPorts are up to four other ports whose named counters moved most in
// the window, within the subject's fabric when the topology names it (a
// retransmissions incident without peers in its evidence: the senders
// were not told apart, the fabric's ports that counted NAKs are the
// candidates).
func movedPorts(ctx context.Context, conn chdb.Conn, inc *Incident, names []string, fromMs, toMs int64) ([]portRef, error) {
	var fabric string
	if err := conn.QueryRow(ctx, `SELECT any(fabric) FROM topology_ports WHERE node = @node AND device = @device AND port = @port`,
		ch.Named("node", inc.Node), ch.Named("device", inc.Device), ch.Named("port", int(inc.Port))).Scan(&fabric); err != nil {
		var exc *ch.Exception
		if !errors.As(err, &exc) || exc.Code != codeUnknownTable {
			return nil, fmt.Errorf("postmortem: fabric of %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT node, device, port, sum(arraySum(`+deltasOf(names)+`)) AS moved
FROM port_samples
WHERE time_ms >= @from_ms AND time_ms <= @to_ms AND first = 0
  AND NOT (node = @node AND device = @device AND port = @port)
  AND (@fabric = '' OR (node, device, port) IN (SELECT node, device, port FROM topology_ports WHERE fabric = @fabric))
GROUP BY node, device, port
HAVING moved > 0
ORDER BY moved DESC, node, device, port
LIMIT 4`, ch.Named("node", inc.Node), ch.Named("device", inc.Device), ch.Named("port", int(inc.Port)),
		ch.Named("from_ms", fromMs), ch.Named("to_ms", toMs), ch.Named("names", names), ch.Named("fabric", fabric))
	if err != nil {
		return nil, fmt.Errorf("postmortem: ports near %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
	}
	defer rows.Close()
	var out []portRef
	for rows.Next() {
		var p portRef
		var moved uint64
		if err := rows.Scan(&p.node, &p.device, &p.port, &moved); err != nil {
			return nil, fmt.Errorf("postmortem: ports near %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func evidenceOf(s string) map[string]any {
	var ev map[string]any
	if json.Unmarshal([]byte(s), &ev) != nil || ev == nil {
		return map[string]any{}
	}
	return ev
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// configRow is one port_config row.
type configRow struct {
	at                    time.Time
	mtu                   *uint32
	pfcKnown, npKnown     uint8
	rpKnown               uint8
	pfc, np, rp           []uint8
	trust                 string
	dscpPrio              []uint8
	cnpDSCP, cnp8021p, tc *uint8
}

// configRows reads a port's configuration rows in the window and the one in
// force at its start. nil without a port_config table.
func configRows(ctx context.Context, conn chdb.Conn, p portRef, fromMs, toMs int64) ([]configRow, error) {
	rows, err := conn.Query(ctx, `SELECT time_ms, mtu, pfc_known, pfc_enabled, ecn_np_known, ecn_np_enabled, ecn_rp_known, ecn_rp_enabled,
    trust, dscp_prio, cnp_dscp, cnp_802p_prio, traffic_class
FROM port_config FINAL
WHERE node = @node AND device = @device AND port = @port AND time_ms <= @to_ms
  AND time_ms >= (SELECT max(time_ms) FROM port_config WHERE node = @node AND device = @device AND port = @port AND time_ms <= @from_ms)
ORDER BY time_ms`, ch.Named("node", p.node), ch.Named("device", p.device), ch.Named("port", int(p.port)),
		ch.Named("from_ms", fromMs), ch.Named("to_ms", toMs))
	var exc *ch.Exception
	if errors.As(err, &exc) && exc.Code == codeUnknownTable {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postmortem: configuration history of %s: %w", p, err)
	}
	defer rows.Close()
	var out []configRow
	for rows.Next() {
		var r configRow
		var tms int64
		if err := rows.Scan(&tms, &r.mtu, &r.pfcKnown, &r.pfc, &r.npKnown, &r.np, &r.rpKnown, &r.rp,
			&r.trust, &r.dscpPrio, &r.cnpDSCP, &r.cnp8021p, &r.tc); err != nil {
			return nil, fmt.Errorf("postmortem: configuration history of %s: %w", p, err)
		}
		r.at = time.UnixMilli(tms).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// settingView is how one setting of config_mismatch is drawn: its value
// in a row (NaN when the host did not expose it), the panel's title and
// unit, the fabric's value from the evidence, and a word for a value in
// the change marker's label.
type settingView struct {
	title, unit string
	value       func(configRow) float64
	fabric      float64 // NaN: none in the evidence
	fabricName  string
	word        func(float64) string
}

var lossless = regexp.MustCompile(`DSCP \[([0-9 ]*)\] on priority (\d+)`)

// viewOf says how to draw setting, from the event's evidence; ok false for
// a setting with no history in port_config (trust, a bond's members).
func viewOf(setting string, ev map[string]any) (settingView, bool) {
	switch setting {
	case "mtu":
		return mtuView(ev), true
	case "pfc_enabled", "ecn_np_enabled", "ecn_rp_enabled":
		return enabledView(setting, ev)
	case "traffic_class":
		return settingView{title: "Forced traffic class", unit: "tclass", fabric: evidenceNum(ev, "fabric_traffic_class"),
			fabricName: "fabric's traffic class" + evidenceShare(ev, "fabric_traffic_class_share"), word: plainWord,
			value: func(r configRow) float64 { return nullable(r.tc) }}, true
	case "cnp_priority":
		return cnpPriorityView(ev), true
	case "dscp_prio":
		return dscpPrioView(ev)
	}
	return settingView{}, false
}

// evidenceNum is the number under k in the evidence, NaN when there is none.
func evidenceNum(ev map[string]any, k string) float64 {
	if f, ok := ev[k].(float64); ok {
		return f
	}
	return math.NaN()
}

// evidenceShare is the share of ports under k in the evidence as the
// fabric value's label reads it, "" when there is none.
func evidenceShare(ev map[string]any, k string) string {
	if f, ok := ev[k].(float64); ok {
		return fmt.Sprintf(" (%.0f%% of ports)", 100*f)
	}
	return ""
}

func plainWord(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func onOffWord(v float64) string {
	if v == 1 {
		return "on"
	}
	return "off"
}

// nullable is a setting the host may not expose: NaN when it did not.
func nullable(v *uint8) float64 {
	if v == nil {
		return math.NaN()
	}
	return float64(*v)
}

func mtuView(ev map[string]any) settingView {
	return settingView{title: "MTU", unit: "bytes", fabric: evidenceNum(ev, "fabric_mtu"),
		fabricName: "fabric's MTU" + evidenceShare(ev, "fabric_mtu_share"), word: plainWord,
		value: func(r configRow) float64 {
			if r.mtu == nil {
				return math.NaN()
			}
			return float64(*r.mtu)
		}}
}

// enabledView draws a per-priority switch (PFC, ECN's notification or
// reaction point) on the evidence's priority: 1 on, 0 off, NaN where the
// host did not say; ok false without a priority in the evidence.
func enabledView(setting string, ev map[string]any) (settingView, bool) {
	if math.IsNaN(evidenceNum(ev, "priority")) {
		return settingView{}, false
	}
	prio := int(evidenceNum(ev, "priority"))
	onPrio := func(known uint8, list []uint8) float64 {
		if known == 0 || prio < 0 {
			return math.NaN()
		}
		for _, p := range list {
			if int(p) == prio {
				return 1
			}
		}
		return 0
	}
	what := map[string]string{"pfc_enabled": "PFC", "ecn_np_enabled": "ECN notification point", "ecn_rp_enabled": "ECN reaction point"}[setting]
	return settingView{title: fmt.Sprintf("%s on priority %d (1 on, 0 off)", what, prio), unit: "on/off", fabric: 1,
		fabricName: "fabric: on" + evidenceShare(ev, "fabric_"+setting+"_share"), word: onOffWord,
		value: func(r configRow) float64 {
			switch setting {
			case "pfc_enabled":
				return onPrio(r.pfcKnown, r.pfc)
			case "ecn_np_enabled":
				return onPrio(r.npKnown, r.np)
			}
			return onPrio(r.rpKnown, r.rp)
		}}, true
}

func cnpPriorityView(ev map[string]any) settingView {
	// schemas.PortConfig.CNPPriority, on a stored row.
	return settingView{title: "Priority of the CNPs", unit: "priority", fabric: evidenceNum(ev, "fabric_cnp_priority"),
		fabricName: "fabric's CNP priority" + evidenceShare(ev, "fabric_cnp_priority_share"), word: plainWord,
		value: func(r configRow) float64 {
			switch r.trust {
			case "dscp":
				if r.cnpDSCP != nil && int(*r.cnpDSCP) < len(r.dscpPrio) && len(r.dscpPrio) == 64 {
					return float64(r.dscpPrio[*r.cnpDSCP])
				}
			case "pcp":
				return nullable(r.cnp8021p)
			}
			return math.NaN()
		}}
}

// dscpPrioView draws the share of the fabric's lossless DSCPs (as the
// evidence's fabric_dscp_prio names them) the port maps to their priority;
// ok false when the evidence names none.
func dscpPrioView(ev map[string]any) (settingView, bool) {
	fab, _ := ev["fabric_dscp_prio"].(string)
	m := lossless.FindStringSubmatch(fab)
	if m == nil {
		return settingView{}, false
	}
	var dscps []int
	for _, f := range strings.Fields(m[1]) {
		if d, err := strconv.Atoi(f); err == nil {
			dscps = append(dscps, d)
		}
	}
	p, _ := strconv.Atoi(m[2])
	return settingView{title: fmt.Sprintf("Share of the fabric's RoCE DSCPs %v the port maps to priority %d", dscps, p), unit: "share",
		fabric: 1, fabricName: "fabric: all", word: func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
		value: func(r configRow) float64 {
			if r.trust != "dscp" || len(r.dscpPrio) != 64 || len(dscps) == 0 {
				return math.NaN()
			}
			n := 0
			for _, d := range dscps {
				if d >= 0 && d < 64 && int(r.dscpPrio[d]) == p {
					n++
				}
			}
			return float64(n) / float64(len(dscps))
		}}, true
}

// configPlot: each setting that differs, the port's value over time (a
// step at each port_config row that changed it) against the fabric's
// value from the evidence, and the link's other end's MTU where the
// evidence names it; the change is a numbered mark like the state changes.
// Its own time axis: the settings are step functions of the port_config
// rows, not of the samples.
func configPlot(ctx context.Context, conn chdb.Conn, inc *Incident, ev map[string]any, plot *Plot, throughput Panel, fromMs, toMs int64) error {
	self := portRef{inc.Node, inc.Device, inc.Port}
	rows, err := configRows(ctx, conn, self, fromMs, toMs)
	if err != nil {
		return err
	}
	var peerRows []configRow
	peers := portsOf([]string{fmt.Sprint(ev["peer"])})
	if len(peers) == 1 {
		if peerRows, err = configRows(ctx, conn, peers[0], fromMs, toMs); err != nil {
			return err
		}
	}
	from, to := time.UnixMilli(fromMs).UTC(), time.UnixMilli(toMs).UTC()
	axis := stepAxis(from, to, rows, peerRows)
	var panels []Panel
	var marks []Mark
	for _, setting := range stringList(ev["settings"]) {
		view, ok := viewOf(setting, ev)
		if !ok {
			continue
		}
		panel := Panel{Title: view.title, Unit: view.unit}
		own := stepValues(axis, rows, view.value)
		if hasFinite(own) {
			panel.Series = append(panel.Series, Series{Name: "this port", Color: colorRcv, Values: own})
		}
		if setting == "mtu" && len(peers) == 1 {
			if pv := stepValues(axis, peerRows, view.value); hasFinite(pv) {
				panel.Series = append(panel.Series, Series{Name: "link's other end " + shortNames(peers)[0], Color: colorTxPause, Values: pv})
			} else if f, ok := ev["peer_mtu"].(float64); ok {
				v := make([]float64, len(axis))
				for i := range v {
					v[i] = f
				}
				panel.Series = append(panel.Series, Series{Name: "link's other end (evidence)", Color: colorTxPause, Values: v})
			}
		}
		if !math.IsNaN(view.fabric) {
			// Dashed and drawn last: where the port or the link's other
			// end agrees with the fabric, both lines stay visible.
			v := make([]float64, len(axis))
			for i := range v {
				v[i] = view.fabric
			}
			panel.Series = append(panel.Series, Series{Name: view.fabricName, Color: "#222222", Values: v, Dashed: true})
		}
		marks = append(marks, configChanges(setting, rows, view, from, to)...)
		panels = append(panels, panel)
	}
	if len(panels) == 0 {
		// A setting with no history to draw (a bond's members, trust):
		// what the port carried, as the other types' default.
		plot.Panels = []Panel{throughput}
		return nil
	}
	plot.Panels = panels
	plot.Times = make([]time.Time, len(axis))
	for i, a := range axis {
		plot.Times[i] = a.t
	}
	plot.Marks = append(plot.Marks, marks...)
	return nil
}

// axisPoint is one time of a step plot; before: the value just before t
// (the old value at a change), else the value at t.
type axisPoint struct {
	t      time.Time
	before bool
}

// stepAxis holds the window's ends and, for every row in it, its time
// twice (before and at), so a change draws as a vertical step.
func stepAxis(from, to time.Time, sets ...[]configRow) []axisPoint {
	axis := []axisPoint{{t: from}, {t: to}}
	for _, rows := range sets {
		for _, r := range rows {
			if r.at.After(from) && r.at.Before(to) {
				axis = append(axis, axisPoint{r.at, true}, axisPoint{r.at, false})
			}
		}
	}
	sort.SliceStable(axis, func(i, j int) bool {
		if !axis[i].t.Equal(axis[j].t) {
			return axis[i].t.Before(axis[j].t)
		}
		return axis[i].before && !axis[j].before
	})
	out := axis[:0]
	for i, a := range axis {
		if i > 0 && a == axis[i-1] {
			continue
		}
		out = append(out, a)
	}
	return out
}

// stepValues is value of the row in force at each axis point; NaN before
// the first row.
func stepValues(axis []axisPoint, rows []configRow, value func(configRow) float64) []float64 {
	out := make([]float64, len(axis))
	for i, a := range axis {
		out[i] = math.NaN()
		for _, r := range rows {
			if r.at.After(a.t) || (a.before && r.at.Equal(a.t)) {
				break
			}
			out[i] = value(r)
		}
	}
	return out
}

// configChanges marks the rows in the window where the setting changed,
// and the first row when the window holds the port's first one.
func configChanges(setting string, rows []configRow, view settingView, from, to time.Time) []Mark {
	var out []Mark
	for i, r := range rows {
		if r.at.Before(from) || r.at.After(to) {
			continue
		}
		v := view.value(r)
		if i == 0 {
			out = append(out, Mark{At: r.at, Label: fmt.Sprintf("config first seen: %s %s", setting, valueWord(view, v))})
			continue
		}
		old := view.value(rows[i-1])
		if v == old || (math.IsNaN(v) && math.IsNaN(old)) {
			continue
		}
		out = append(out, Mark{At: r.at, Label: fmt.Sprintf("config change: %s %s -> %s", setting, valueWord(view, old), valueWord(view, v))})
	}
	return out
}

func valueWord(view settingView, v float64) string {
	if math.IsNaN(v) {
		return "unknown"
	}
	return view.word(v)
}

func hasFinite(v []float64) bool {
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return true
		}
	}
	return false
}
