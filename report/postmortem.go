package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Incident is one incident of the report, in its latest state.
type Incident struct {
	ID, Type, State, Severity, Scope, Layer, Summary string
	Node, Device                                     string
	Port                                             uint16
	StartMs                                          int64
	EndMs                                            *int64
	LastMs                                           int64
	Evidence                                         string
	NextChecks                                       []string
	Changes                                          []Change
	Moved                                            []Moved
	Plot                                             string // SVG file name, "" when no port to plot
	// The incident that explains this one (events' cause); CauseID "" when
	// none is named.
	CauseID, CauseType, CauseNode, CauseDevice string
	CausePort                                  uint16
	// Config is the port's configuration at the onset and its changes
	// during the incident (config.go).
	Config []PortConfig
}

// Change is one state change (one row of events).
type Change struct {
	DetectedAtMs int64
	Revision     uint32
	State        string
	Summary      string
}

// Moved is a counter of the plotted port that moved during the incident,
// against the same length of time before it.
type Moved struct {
	Counter            string
	Before, During     uint64
	BeforeRate, Rate   float64 // per second
	BeforeS, DuringS   float64 // seconds of samples
	RiseFactor         float64 // Rate / BeforeRate; +Inf when it was 0
	BeforeWindowString string
}

// Postmortem writes report.md and one SVG per incident into dir for the
// incidents overlapping p's range (p.Node filters as the events query
// does), and returns the report's path.
func Postmortem(ctx context.Context, conn chdb.Conn, p Params, dir string) (string, []Incident, error) {
	if p.From.IsZero() || p.To.IsZero() || !p.To.After(p.From) {
		return "", nil, fmt.Errorf("postmortem: --from and --to must give a range (from %v to %v)", p.From, p.To)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("postmortem: %w", err)
	}
	incs, err := incidents(ctx, conn, p)
	if err != nil {
		return "", nil, err
	}
	for i := range incs {
		inc := &incs[i]
		if err := changes(ctx, conn, inc); err != nil {
			return "", nil, err
		}
		if inc.Device == "" {
			continue // node or fabric scope: no single port to plot
		}
		if err := moved(ctx, conn, inc); err != nil {
			return "", nil, err
		}
		if err := portConfig(ctx, conn, inc); err != nil {
			return "", nil, err
		}
		plot, err := portPlot(ctx, conn, inc)
		if err != nil {
			return "", nil, err
		}
		inc.Plot = fmt.Sprintf("incident-%02d.svg", i+1)
		f, err := os.Create(filepath.Join(dir, inc.Plot))
		if err != nil {
			return "", nil, fmt.Errorf("postmortem: %w", err)
		}
		werr := plot.WriteSVG(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", nil, fmt.Errorf("postmortem: write %s: %w", inc.Plot, werr)
		}
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(markdown(p, incs)), 0o644); err != nil {
		return "", nil, fmt.Errorf("postmortem: %w", err)
	}
	return path, incs, nil
}

func incidents(ctx context.Context, conn chdb.Conn, p Params) ([]Incident, error) {
	rows, err := conn.Query(ctx, `SELECT id, type, state, severity, scope, layer, summary,
    if(scope = 'port' OR has_origin = 0, subject_node, origin_node),
    if(scope = 'port' OR has_origin = 0, subject_device, origin_device),
    if(scope = 'port' OR has_origin = 0, subject_port, origin_port),
    start_ms, end_ms, last_detected_at_ms, evidence, next_checks,
    cause_id, cause_type, cause_node, cause_device, cause_port
FROM events_latest
WHERE start_ms < @to * 1000 AND (isNull(end_ms) OR assumeNotNull(end_ms) >= @from * 1000)
  AND (@node = '' OR subject_node = @node OR origin_node = @node OR has(affected_node, @node))
ORDER BY start_ms, type, id`, p.args()...)
	if err != nil {
		return nil, fmt.Errorf("postmortem: incidents: %w", err)
	}
	defer rows.Close()
	var out []Incident
	for rows.Next() {
		var in Incident
		if err := rows.Scan(&in.ID, &in.Type, &in.State, &in.Severity, &in.Scope, &in.Layer, &in.Summary,
			&in.Node, &in.Device, &in.Port, &in.StartMs, &in.EndMs, &in.LastMs, &in.Evidence, &in.NextChecks,
			&in.CauseID, &in.CauseType, &in.CauseNode, &in.CauseDevice, &in.CausePort); err != nil {
			return nil, fmt.Errorf("postmortem: incidents: %w", err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

func changes(ctx context.Context, conn chdb.Conn, inc *Incident) error {
	rows, err := conn.Query(ctx, `SELECT detected_at_ms, revision, state, summary FROM events FINAL
WHERE type = @type AND id = @id ORDER BY revision`, ch.Named("type", inc.Type), ch.Named("id", inc.ID))
	if err != nil {
		return fmt.Errorf("postmortem: state changes of %s: %w", inc.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Change
		if err := rows.Scan(&c.DetectedAtMs, &c.Revision, &c.State, &c.Summary); err != nil {
			return fmt.Errorf("postmortem: state changes of %s: %w", inc.ID, err)
		}
		inc.Changes = append(inc.Changes, c)
	}
	return rows.Err()
}

// end is the incident's end, or its last detection while open.
func (inc *Incident) end() int64 {
	if inc.EndMs != nil {
		return *inc.EndMs
	}
	return inc.LastMs
}

func (inc *Incident) portArgs(fromMs, toMs int64) []any {
	return []any{ch.Named("node", inc.Node), ch.Named("device", inc.Device), ch.Named("port", int(inc.Port)),
		ch.Named("from_ms", fromMs), ch.Named("to_ms", toMs)}
}

// moved compares every counter of the port during the incident with the
// same length of time before its onset.
func moved(ctx context.Context, conn chdb.Conn, inc *Incident) error {
	start, end := inc.StartMs, max(inc.end(), inc.StartMs+1000)
	length := end - start
	rows, err := conn.Query(ctx, `SELECT name,
    sumIf(delta, time_ms < @start) AS before, sumIf(delta, time_ms >= @start) AS during,
    sumIf(interval_ms, time_ms < @start) AS before_ms, sumIf(interval_ms, time_ms >= @start) AS during_ms
FROM port_samples FINAL
ARRAY JOIN delta_name AS name, delta_value AS delta
WHERE node = @node AND device = @device AND port = @port AND time_ms >= @from_ms AND time_ms <= @to_ms AND first = 0
GROUP BY name
HAVING during > 0
ORDER BY name`, append(inc.portArgs(start-length, end), ch.Named("start", start))...)
	if err != nil {
		return fmt.Errorf("postmortem: counters of %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m Moved
		var beforeMs, duringMs int64
		if err := rows.Scan(&m.Counter, &m.Before, &m.During, &beforeMs, &duringMs); err != nil {
			return fmt.Errorf("postmortem: counters of %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
		}
		m.BeforeS, m.DuringS = float64(beforeMs)/1000, float64(duringMs)/1000
		if m.BeforeS > 0 {
			m.BeforeRate = float64(m.Before) / m.BeforeS
		}
		if m.DuringS > 0 {
			m.Rate = float64(m.During) / m.DuringS
		}
		switch {
		case m.BeforeRate > 0:
			m.RiseFactor = m.Rate / m.BeforeRate
		case m.Rate > 0:
			m.RiseFactor = math.Inf(1)
		}
		inc.Moved = append(inc.Moved, m)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// What rose most first; a counter that only kept its usual pace last.
	sort.SliceStable(inc.Moved, func(i, j int) bool { return inc.Moved[i].RiseFactor > inc.Moved[j].RiseFactor })
	return nil
}

// series is one port's key figures over a window, one entry per sample.
// The pause fractions are the busiest priority's or the IEEE 802.3x global
// pause's (schemas.PortFigures); the Ethernet BERs are over rx_bits_phy
// where the port lists it, else over the link rate x interval
// (countedBits says whether any sample counted rx_bits_phy). A throughput
// whose data counter is pinned at its 32-bit top is NaN (a gap), not 0.
type series struct {
	times                                                   []time.Time
	rcv, xmit, txPause, rxPause, ber, symBER, cnpOut, cnpIn []float64
	ecnMarked, postBER                                      []float64
	countedBits                                             bool
}

func portSeries(ctx context.Context, conn chdb.Conn, node, device string, port int, fromMs, toMs int64) (*series, error) {
	rows, err := conn.Query(ctx, `SELECT time_ms, rcv_gbps, xmit_gbps, tx_pause_fraction, rx_pause_fraction,
    pre_fec_ber, symbol_ber,
    if(interval_ms > 0, np_cnp_sent * 1000 / interval_ms, 0),
    if(interval_ms > 0, rp_cnp_handled * 1000 / interval_ms, 0),
    if(interval_ms > 0, np_ecn_marked_roce_packets * 1000 / interval_ms, 0),
    post_fec_ber, toUInt8(rx_bits_phy > 0),
    toUInt8(has(saturated, 'port_rcv_data')), toUInt8(has(saturated, 'port_xmit_data'))
FROM port_samples FINAL
WHERE node = @node AND device = @device AND port = @port AND time_ms >= @from_ms AND time_ms <= @to_ms AND first = 0
ORDER BY time_ms`, ch.Named("node", node), ch.Named("device", device), ch.Named("port", port),
		ch.Named("from_ms", fromMs), ch.Named("to_ms", toMs))
	if err != nil {
		return nil, fmt.Errorf("postmortem: series of %s/%s/%d: %w", node, device, port, err)
	}
	defer rows.Close()
	s := &series{}
	for rows.Next() {
		var (
			tms                                   int64
			r, x, tp, rp, b, sb, cs, chd, ecn, pb float64
			counted, rcvPinned, xmitPinned        uint8
		)
		if err := rows.Scan(&tms, &r, &x, &tp, &rp, &b, &sb, &cs, &chd, &ecn, &pb, &counted, &rcvPinned, &xmitPinned); err != nil {
			return nil, fmt.Errorf("postmortem: series of %s/%s/%d: %w", node, device, port, err)
		}
		if rcvPinned != 0 {
			r = math.NaN() // a pinned 32-bit counter: unknown, not idle
		}
		if xmitPinned != 0 {
			x = math.NaN()
		}
		s.postBER = append(s.postBER, pb)
		s.countedBits = s.countedBits || counted != 0
		s.times = append(s.times, time.UnixMilli(tms).UTC())
		s.rcv, s.xmit, s.txPause, s.rxPause = append(s.rcv, r), append(s.xmit, x), append(s.txPause, tp), append(s.rxPause, rp)
		s.ber, s.symBER, s.cnpOut, s.cnpIn = append(s.ber, b), append(s.symBER, sb), append(s.cnpOut, cs), append(s.cnpIn, chd)
		s.ecnMarked = append(s.ecnMarked, ecn)
	}
	return s, rows.Err()
}

// at re-samples values of other onto times (the nearest earlier sample
// within 2 intervals), so a victim's series shares the origin's axis.
func (s *series) at(times []time.Time, values func(*series) []float64) []float64 {
	out := make([]float64, len(times))
	src := values(s)
	j := 0
	for i, t := range times {
		for j+1 < len(s.times) && !s.times[j+1].After(t) {
			j++
		}
		out[i] = math.NaN()
		if j < len(s.times) && !s.times[j].After(t) && i > 0 && t.Sub(s.times[j]) <= 2*t.Sub(times[i-1]) {
			out[i] = src[j]
		}
	}
	return out
}

// Colours of the plots, one per role of a series.
const (
	colorRcv, colorXmit     = "#1f77b4", "#2ca02c"
	colorTxPause, colorRx   = "#d62728", "#9467bd"
	colorBER, colorSymBER   = "#ff7f0e", "#8c564b"
	colorCNPOut, colorCNPIn = "#17becf", "#7f7f7f"
	colorECN, colorCritical = "#e377c2", "#c00000"
)

var victimColors = []string{"#9467bd", "#bcbd22", "#8c564b", "#7f7f7f", "#17becf"}

// portPlot draws the series that prove the incident's type: for a storm the
// pauses its origin sends and those its victims receive; for a BER drift the
// BER against the critical level and the projected crossing; for a CNP/ECN
// imbalance ECN marks against the CNPs sent and handled; for the
// application and transport types and config_mismatch, see plot_types.go.
func portPlot(ctx context.Context, conn chdb.Conn, inc *Incident) (*Plot, error) {
	start, end := inc.StartMs, inc.end()
	pad := max((end-start)/4, 5*60*1000)
	s, err := portSeries(ctx, conn, inc.Node, inc.Device, int(inc.Port), start-pad, end+pad)
	if err != nil {
		return nil, err
	}
	plot := newPortPlot(inc, s)
	throughput, pauses, ber, cnp := portPanels(s)
	switch inc.Type {
	case "pfc_storm":
		pauses.Series = pauses.Series[:1]
		pauses.Series[0].Name = "origin: pauses sent (tx)"
		victims, err := victimPauses(ctx, conn, inc, s, start-pad, end+pad)
		if err != nil {
			return nil, err
		}
		pauses.Series = append(pauses.Series, victims...)
		plot.Panels = []Panel{pauses, throughput}
	case "ber_drift":
		if err := berDriftPlot(ctx, conn, inc, s, plot, ber, throughput); err != nil {
			return nil, err
		}
	case "cnp_ecn_imbalance":
		plot.Panels = []Panel{cnp, throughput}
	case "receive_starvation", "retransmissions", "completion_errors", "config_mismatch":
		// Their own evidence (plot_types.go), not the default panels.
		if err := typePlot(ctx, conn, inc, plot, s, throughput, pauses, start-pad, end+pad); err != nil {
			return nil, err
		}
	default:
		plot.Panels = []Panel{throughput, pauses, ber, cnp}
	}
	return plot, nil
}

// newPortPlot is an incident's plot on its port's time axis, with the
// incident's span and its state changes marked, and no panels yet.
func newPortPlot(inc *Incident, s *series) *Plot {
	plot := &Plot{
		Title:     fmt.Sprintf("%s on %s/%s/%d", inc.Type, inc.Node, inc.Device, inc.Port),
		Times:     s.times,
		SpanStart: time.UnixMilli(inc.StartMs).UTC(),
	}
	if inc.EndMs != nil {
		plot.SpanEnd = time.UnixMilli(*inc.EndMs).UTC()
	}
	for _, c := range inc.Changes {
		plot.Marks = append(plot.Marks, Mark{At: time.UnixMilli(c.DetectedAtMs).UTC(), Label: fmt.Sprintf("%s (revision %d)", c.State, c.Revision)})
	}
	return plot
}

// portPanels are the port's default panels, which the types' plots pick
// from and trim.
func portPanels(s *series) (throughput, pauses, ber, cnp Panel) {
	throughput = Panel{Title: "Throughput", Unit: "Gb/s", Series: []Series{{Name: "received", Color: colorRcv, Values: s.rcv}, {Name: "sent", Color: colorXmit, Values: s.xmit}}}
	pauses = Panel{Title: "Pause fraction (busiest priority or 802.3x global pause)", Unit: "fraction", Series: []Series{{Name: "pauses sent (tx)", Color: colorTxPause, Values: s.txPause}, {Name: "paused by peer (rx)", Color: colorRx, Values: s.rxPause}}}
	ber = Panel{Title: "Bit error rate", Log: true, Series: []Series{{Name: "pre-FEC BER (over " + ethBits(s) + ")", Color: colorBER, Values: s.ber}, {Name: "symbol BER (IB)", Color: colorSymBER, Values: s.symBER}}}
	cnp = Panel{Title: "ECN marks and CNPs", Unit: "per s", Series: []Series{
		{Name: "ECN-marked packets (NP)", Color: colorECN, Values: s.ecnMarked},
		{Name: "CNPs sent (NP)", Color: colorCNPOut, Values: s.cnpOut},
		{Name: "CNPs handled (RP)", Color: colorCNPIn, Values: s.cnpIn, Dashed: true}}}
	return throughput, pauses, ber, cnp
}

// ethBits names what an Ethernet port's BER is over: the PHY's bit count
// where the port has one, else the link rate over the interval.
func ethBits(s *series) string {
	if !s.countedBits {
		return "link rate x time"
	}
	return "rx_bits_phy"
}

// berDriftPlot gives a ber_drift's plot its panels: the BER the incident
// judged against its critical level, with the crossings it knew of, and the
// throughput; the time axis runs on to a crossing past the last sample.
func berDriftPlot(ctx context.Context, conn chdb.Conn, inc *Incident, s *series, plot *Plot, ber, throughput Panel) error {
	ber = judgedBER(inc, s, ber)
	// What the incident knew: where the BER crossed (observed, the
	// latest evidence's critical_crossed_at) and the crossing it
	// projected when it was announced (the first
	// projected_critical_at): the lead the alert gave, and how right it
	// was. The latest projection of an incident not yet crossed is
	// drawn as such.
	var marks []Mark
	if at, ok := evidenceTime(inc.Evidence, "critical_crossed_at"); ok {
		marks = append(marks, Mark{At: at, Label: "observed crossing " + at.Format("15:04:05")})
	} else if at, ok := projectedCrossing(inc.Evidence); ok && inc.EndMs == nil {
		marks = append(marks, Mark{At: at, Label: "projected crossing (latest) " + at.Format("15:04")})
	}
	announced, err := announcedCrossing(ctx, conn, inc)
	if err != nil {
		return err
	}
	if !announced.IsZero() {
		marks = append(marks, Mark{At: announced, Label: "projected when announced " + announced.Format("15:04")})
	}
	plot.Projected = append(plot.Projected, marks...)
	if at := latestMark(marks); !at.IsZero() {
		if last := s.times; len(last) > 0 && at.After(last[len(last)-1]) {
			// Show the crossing: extend the axis to it.
			plot.Times = append(append([]time.Time(nil), s.times...), at.Add(time.Minute))
			for k := range ber.Series {
				ber.Series[k].Values = append(append([]float64(nil), ber.Series[k].Values...), math.NaN())
			}
			throughput.Series[0].Values = append(append([]float64(nil), s.rcv...), math.NaN())
			throughput.Series[1].Values = append(append([]float64(nil), s.xmit...), math.NaN())
		}
	}
	plot.Panels = []Panel{ber, throughput}
	return nil
}

// judgedBER keeps of the BER panel the series ber_drift judged, with its
// critical level: the symbol BER of an InfiniBand port, the post-FEC BER
// of a port without a pre-FEC counter, else the pre-FEC BER.
func judgedBER(inc *Incident, s *series, ber Panel) Panel {
	switch {
	case hasValues(s.symBER) && !hasValues(s.ber):
		ber.Series = ber.Series[1:]
		ber.Levels = []Level{{Name: "critical symbol BER 1e-12", Value: schemas.CriticalSymbolBER, Color: colorCritical}}
	case !hasValues(s.ber) && (hasValues(s.postBER) || postFECOnly(inc.Evidence)):
		// A port without rx_corrected_bits_phy: ber_drift judged the
		// symbol errors FEC left, against the post-FEC level.
		ber.Series = []Series{{Name: "post-FEC BER (over " + ethBits(s) + ")", Color: colorBER, Values: s.postBER}}
		ber.Levels = []Level{{Name: "critical post-FEC BER 1e-12", Value: schemas.CriticalPostFECBER, Color: colorCritical}}
	default:
		ber.Series = ber.Series[:1]
		ber.Levels = []Level{{Name: "critical pre-FEC BER 1e-6", Value: schemas.CriticalPreFECBER, Color: colorCritical}}
	}
	return ber
}

func hasValues(v []float64) bool {
	for _, x := range v {
		if x > 0 && !math.IsNaN(x) {
			return true
		}
	}
	return false
}

// postFECOnly reads post_fec_only from a ber_drift's evidence: the port
// has no pre-FEC counter.
func postFECOnly(evidence string) bool {
	var ev map[string]any
	if json.Unmarshal([]byte(evidence), &ev) != nil {
		return false
	}
	v, _ := ev["post_fec_only"].(bool)
	return v
}

// projectedCrossing reads projected_critical_at from a ber_drift's evidence.
func projectedCrossing(evidence string) (time.Time, bool) {
	var ev map[string]any
	if json.Unmarshal([]byte(evidence), &ev) != nil {
		return time.Time{}, false
	}
	s, _ := ev["projected_critical_at"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err == nil
}

// evidenceTime reads a time field of an event's evidence.
func evidenceTime(evidence, key string) (time.Time, bool) {
	var ev map[string]any
	if json.Unmarshal([]byte(evidence), &ev) != nil {
		return time.Time{}, false
	}
	s, _ := ev[key].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err == nil
}

// announcedCrossing is the first projected_critical_at a ber_drift
// published before it crossed: the crossing it announced (zero when none
// is stored). ber_drift withholds a projection it does not know to 20 %,
// so the open may carry none and a later update the first.
func announcedCrossing(ctx context.Context, conn chdb.Conn, inc *Incident) (time.Time, error) {
	rows, err := conn.Query(ctx, `SELECT evidence FROM events FINAL
WHERE type = @type AND id = @id AND state != 'resolved' ORDER BY revision`, ch.Named("type", inc.Type), ch.Named("id", inc.ID))
	if err != nil {
		return time.Time{}, fmt.Errorf("postmortem: the announcement of %s: %w", inc.ID, err)
	}
	defer rows.Close()
	var at time.Time
	for rows.Next() {
		var ev string
		if err := rows.Scan(&ev); err != nil {
			return time.Time{}, fmt.Errorf("postmortem: the announcement of %s: %w", inc.ID, err)
		}
		if !at.IsZero() {
			continue // drain the rows: the first projection is the announcement
		}
		if p, ok := projectedCrossing(ev); ok {
			if _, crossed := evidenceTime(ev, "critical_crossed_at"); !crossed {
				at = p
			}
		}
	}
	return at, rows.Err()
}

func latestMark(marks []Mark) time.Time {
	var at time.Time
	for _, m := range marks {
		if m.At.After(at) {
			at = m.At
		}
	}
	return at
}

// victimPauses are the rx pause fractions of up to five ports the storm
// reached, re-sampled onto the origin's times.
func victimPauses(ctx context.Context, conn chdb.Conn, inc *Incident, origin *series, fromMs, toMs int64) ([]Series, error) {
	rows, err := conn.Query(ctx, `SELECT affected_node, affected_device, affected_port FROM events_latest WHERE id = @id LIMIT 1`, ch.Named("id", inc.ID))
	if err != nil {
		return nil, fmt.Errorf("postmortem: ports reached by %s: %w", inc.ID, err)
	}
	var (
		nodes, devices []string
		ports          []uint16
	)
	for rows.Next() {
		if err := rows.Scan(&nodes, &devices, &ports); err != nil {
			rows.Close()
			return nil, fmt.Errorf("postmortem: ports reached by %s: %w", inc.ID, err)
		}
	}
	rows.Close()
	var out []Series
	for i := range min(len(nodes), len(devices), len(ports), len(victimColors)) {
		v, err := portSeries(ctx, conn, nodes[i], devices[i], int(ports[i]), fromMs, toMs)
		if err != nil {
			return nil, err
		}
		out = append(out, Series{
			Name:   fmt.Sprintf("victim %s/%s/%d (rx)", nodes[i], devices[i], ports[i]),
			Color:  victimColors[i],
			Values: v.at(origin.times, func(s *series) []float64 { return s.rxPause }),
			Dashed: true,
		})
	}
	if n := len(nodes); n > len(victimColors) {
		out = append(out, Series{Name: fmt.Sprintf("(+%d more victims)", n-len(victimColors)), Color: "#ffffff"})
	}
	return out, nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z") }

func markdown(p Params, incs []Incident) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Postmortem: %s to %s\n\n", p.From.UTC().Format(time.RFC3339), p.To.UTC().Format(time.RFC3339))
	if p.Node != "" {
		fmt.Fprintf(&b, "Node filter: `%s`.\n\n", p.Node)
	}
	fmt.Fprintf(&b, "Generated by `rdmawatch postmortem` from ClickHouse. Times are data time, UTC.\n\n")
	if len(incs) == 0 {
		b.WriteString("No incidents overlap this range.\n")
		return b.String()
	}
	b.WriteString(causeChains(incs))
	b.WriteString("## Timeline\n\n| time | incident | state | subject | summary |\n|---|---|---|---|---|\n")
	type line struct {
		ms  int64
		row string
	}
	var lines []line
	for i, inc := range incs {
		for _, c := range inc.Changes {
			lines = append(lines, line{c.DetectedAtMs, fmt.Sprintf("| %s | %d. %s | %s | %s | %s |", fmtMs(c.DetectedAtMs), i+1, inc.Type, c.State, subject(inc), cell(c.Summary))})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].ms < lines[j].ms })
	for _, l := range lines {
		b.WriteString(l.row + "\n")
	}
	for i, inc := range incs {
		fmt.Fprintf(&b, "\n## %d. %s on %s (%s, %s)\n\n", i+1, inc.Type, subject(inc), inc.Severity, inc.State)
		end := "still open"
		if inc.EndMs != nil {
			end = fmtMs(*inc.EndMs)
		}
		fmt.Fprintf(&b, "- id: `%s`\n- onset: %s; end: %s\n- layer: %s\n- summary: %s\n", inc.ID, fmtMs(inc.StartMs), end, inc.Layer, inc.Summary)
		if inc.CauseID != "" {
			fmt.Fprintf(&b, "- %s\n", causedBy(inc, incs))
		}
		if inc.Evidence != "" && inc.Evidence != "{}" {
			fmt.Fprintf(&b, "- evidence: `%s`\n", inc.Evidence)
		}
		for j, n := range inc.NextChecks {
			if j == 0 {
				b.WriteString("- next checks:\n")
			}
			fmt.Fprintf(&b, "  - `%s`\n", n)
		}
		if len(inc.Moved) > 0 {
			fmt.Fprintf(&b, "\nCounters of %s that moved during the incident, against the same length of time before the onset:\n\n", subject(inc))
			b.WriteString("| counter | before | during | before /s | during /s | change |\n|---|---:|---:|---:|---:|---:|\n")
			for _, m := range inc.Moved {
				rise := "new"
				if !math.IsInf(m.RiseFactor, 1) {
					rise = fmt.Sprintf("x%.3g", m.RiseFactor)
				}
				fmt.Fprintf(&b, "| %s | %d | %d | %.4g | %.4g | %s |\n", m.Counter, m.Before, m.During, m.BeforeRate, m.Rate, rise)
			}
		}
		b.WriteString(configMarkdown(inc))
		if inc.Plot != "" {
			fmt.Fprintf(&b, "\n![%s around %s](%s)\n", inc.Type, subject(inc), inc.Plot)
		} else {
			b.WriteString("\nNo single port to plot (node or fabric scope).\n")
		}
	}
	return b.String()
}

// causedBy says which incident explains inc: its number in this report,
// or its id when it lies outside the report's range or filter.
func causedBy(inc Incident, incs []Incident) string {
	where := fmt.Sprintf("id `%s`, not in this report", inc.CauseID)
	if n := incidentNumber(incs, inc.CauseID); n > 0 {
		where = fmt.Sprintf("incident %d", n)
	}
	return fmt.Sprintf("caused by %s on %s (%s)", inc.CauseType, causeSubject(inc), where)
}

// incidentNumber is the 1-based position of the incident id in incs, 0 if absent.
func incidentNumber(incs []Incident, id string) int {
	for i, in := range incs {
		if in.ID == id {
			return i + 1
		}
	}
	return 0
}

func causeSubject(inc Incident) string {
	return subject(Incident{Node: inc.CauseNode, Device: inc.CauseDevice, Port: inc.CausePort})
}

// causeChains lists every chain of the report, root cause first: a root
// is an incident that explains another and names no cause in the report
// (none, or one outside it); its effects follow, one level deeper each.
// Empty when no incident names a cause.
func causeChains(incs []Incident) string {
	effects := map[string][]int{}
	for i, in := range incs {
		if in.CauseID != "" {
			effects[in.CauseID] = append(effects[in.CauseID], i)
		}
	}
	if len(effects) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Cause chains\n\n")
	seen := map[int]bool{}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] { // a cycle in bad data must not recurse forever
			return
		}
		seen[i] = true
		in := incs[i]
		arrow := ""
		if depth > 0 {
			arrow = "→ "
		}
		fmt.Fprintf(&b, "%s- %s%d. %s on %s (%s)\n", strings.Repeat("  ", depth), arrow, i+1, in.Type, subject(in), fmtMs(in.StartMs))
		for _, e := range effects[in.ID] {
			walk(e, depth+1)
		}
	}
	for i, in := range incs {
		if len(effects[in.ID]) > 0 && in.CauseID == "" {
			walk(i, 0)
		}
	}
	// Effects whose cause lies outside the report: name the cause by id.
	outside := map[string]bool{}
	for _, in := range incs {
		if in.CauseID == "" || incidentNumber(incs, in.CauseID) > 0 || outside[in.CauseID] {
			continue
		}
		outside[in.CauseID] = true
		fmt.Fprintf(&b, "- %s on %s (id `%s`, not in this report)\n", in.CauseType, causeSubject(in), in.CauseID)
		for _, e := range effects[in.CauseID] {
			walk(e, 1)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func subject(inc Incident) string {
	switch {
	case inc.Device != "":
		return fmt.Sprintf("%s/%s/%d", inc.Node, inc.Device, inc.Port)
	case inc.Node != "":
		return inc.Node
	}
	return "the fabric"
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }
