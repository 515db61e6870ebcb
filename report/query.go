// Package report runs the queries shipped in schemas/ddl/queries
// and writes the postmortem report: the events of a time range in order, the
// counters that moved, and an SVG plot of the key series around each event.
package report

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// Params are the filters every shipped query takes.
type Params struct {
	From, To time.Time // [From, To), second resolution
	Node     string    // "" = every node
	Device   string    // "" = every device
	Port     int       // 0 = every port
	Limit    int       // rows, for the queries that rank (0: 20)
	// Event filters (the events query): comma-separated lists, "" = all.
	Type, Severity, State, Layer string
	// Trends: the group (leaf, rack, node, fabric; "" = leaf) and the
	// bucket (hour, day, week; "" = day).
	By, Bucket string
}

func (p Params) validate(q chdb.Query) error {
	if p.From.IsZero() || p.To.IsZero() {
		return fmt.Errorf("query %s: --from and --to are required", q.Name)
	}
	if !p.To.After(p.From) {
		return fmt.Errorf("query %s: --to %s is not after --from %s", q.Name, p.To.Format(time.RFC3339), p.From.Format(time.RFC3339))
	}
	if p.Port < 0 || p.Port > math.MaxUint16 {
		return fmt.Errorf("query %s: --port %d out of range", q.Name, p.Port)
	}
	if p.By == "spine" {
		// Every leaf uplinks to every spine (ECMP spreads a host's traffic
		// over all of them): a spine's group would be the whole fabric,
		// and its sums would count every port once per spine.
		return fmt.Errorf("query %s: --by spine: every leaf uplinks to every spine, so each spine's group would be the whole fabric counted again; use --by fabric (or leaf, rack)", q.Name)
	}
	if !oneOf(p.By, "", "leaf", "rack", "node", "fabric") {
		return fmt.Errorf("query %s: --by %q: want leaf, rack, node or fabric", q.Name, p.By)
	}
	if !oneOf(p.Bucket, "", "hour", "day", "week") {
		return fmt.Errorf("query %s: --bucket %q: want hour, day or week", q.Name, p.Bucket)
	}
	for _, n := range q.Needs {
		if n == "node" && p.Node == "" {
			return fmt.Errorf("query %s needs --node (or --event)", q.Name)
		}
	}
	return nil
}

func oneOf(s string, set ...string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func (p Params) args() []any {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	by, bucket := p.By, p.Bucket
	if by == "" {
		by = "leaf"
	}
	if bucket == "" {
		bucket = "day"
	}
	return []any{
		ch.Named("from", p.From.Unix()),
		ch.Named("to", p.To.Unix()),
		ch.Named("node", p.Node),
		ch.Named("device", p.Device),
		ch.Named("port", p.Port),
		ch.Named("limit", limit),
		ch.Named("type", p.Type),
		ch.Named("severity", p.Severity),
		ch.Named("state", p.State),
		ch.Named("layer", p.Layer),
		ch.Named("by", by),
		ch.Named("bucket", bucket),
	}
}

// Result is what a query returned, values as the driver scanned them.
type Result struct {
	Query   string
	Columns []string
	Rows    [][]any
	// MaxCell cuts long text cells of the table format (0: DefaultMaxCell,
	// <0: never); JSON and CSV always carry everything.
	MaxCell int
}

// DefaultMaxCell keeps a table row near a terminal's width.
const DefaultMaxCell = 72

// tableHidden are columns for machines and the postmortem: JSON and CSV
// carry them, the table leaves them out.
var tableHidden = map[string]bool{"evidence": true, "next_checks": true}

// jsonColumns hold JSON text that --format json embeds as JSON.
var jsonColumns = map[string]bool{"evidence": true}

// cut shortens s to max runes with an ellipsis.
func cut(s string, max int) string {
	if max == 0 {
		max = DefaultMaxCell
	}
	r := []rune(s)
	if max < 0 || len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// human renders a table cell in the unit its column name implies: bytes in
// KiB..PiB, Gb/s, fractions and utilisation in %, BER in scientific
// notation. Other cells as text does.
func human(col string, v any) string {
	f, ok := number(v)
	switch {
	case !ok:
		return text(v)
	case strings.HasSuffix(col, "_bytes"):
		return bytesIEC(f)
	case strings.HasSuffix(col, "_gbps") || col == "gbps":
		return strconv.FormatFloat(f, 'f', 1, 64) + " Gb/s"
	case strings.Contains(col, "utilisation") || strings.HasSuffix(col, "_fraction"):
		return strconv.FormatFloat(100*f, 'f', 1, 64) + " %"
	case strings.HasSuffix(col, "_ber") || col == "ber":
		return strconv.FormatFloat(f, 'e', 2, 64)
	}
	return text(v)
}

func number(v any) (float64, bool) {
	switch x := deref(v).(type) {
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), true
	case int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, uint:
		f, err := strconv.ParseFloat(fmt.Sprint(x), 64)
		return f, err == nil
	}
	return 0, false
}

func bytesIEC(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

// Run runs the shipped query name with p.
func Run(ctx context.Context, conn chdb.Conn, name string, p Params) (*Result, error) {
	q, err := chdb.QueryByName(name)
	if err != nil {
		return nil, err
	}
	return RunQuery(ctx, conn, q, p)
}

// RunQuery runs q with p.
func RunQuery(ctx context.Context, conn chdb.Conn, q chdb.Query, p Params) (*Result, error) {
	if err := p.validate(q); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, q.SQL, p.args()...)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q.Name, err)
	}
	defer rows.Close()
	res := &Result{Query: q.Name, Columns: rows.Columns()}
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, t := range types {
			ptrs[i] = reflect.New(t.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("query %s: row %d: %w", q.Name, len(res.Rows)+1, err)
		}
		row := make([]any, len(ptrs))
		for i, ptr := range ptrs {
			row[i] = reflect.ValueOf(ptr).Elem().Interface()
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query %s: %w", q.Name, err)
	}
	return res, nil
}

// Column returns the index of the column name, or -1.
func (r *Result) Column(name string) int {
	for i, c := range r.Columns {
		if c == name {
			return i
		}
	}
	return -1
}

// Formats Write takes.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatCSV   = "csv"
)

// Write writes the result as an aligned table, JSON Lines (one object per
// row, as the project's other machine-read outputs) or CSV with a header.
func (r *Result) Write(w io.Writer, format string) error {
	switch format {
	case FormatTable, "":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		var shown []int // long machine-read columns stay out of the table
		for i, c := range r.Columns {
			if !tableHidden[c] {
				shown = append(shown, i)
			}
		}
		head := make([]string, len(shown))
		for k, i := range shown {
			head[k] = r.Columns[i]
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, row := range r.Rows {
			cells := make([]string, len(shown))
			for k, i := range shown {
				cells[k] = cut(human(r.Columns[i], row[i]), r.MaxCell)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "(%d rows)\n", len(r.Rows))
		return err
	case FormatJSON:
		enc := json.NewEncoder(w)
		for _, row := range r.Rows {
			obj := make(map[string]any, len(row))
			for i, v := range row {
				obj[r.Columns[i]] = jsonValue(v)
				if str, ok := v.(string); ok && jsonColumns[r.Columns[i]] && json.Valid([]byte(str)) {
					obj[r.Columns[i]] = json.RawMessage(str) // evidence: an object, not a string
				}
			}
			if err := enc.Encode(obj); err != nil {
				return err
			}
		}
		return nil
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(r.Columns); err != nil {
			return err
		}
		for _, row := range r.Rows {
			cells := make([]string, len(row))
			for i, v := range row {
				cells[i] = text(v)
			}
			if err := cw.Write(cells); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("--format %q: want table, json or csv", format)
}

// text renders a value for a table or CSV cell.
func text(v any) string {
	switch x := deref(v).(type) {
	case nil:
		return ""
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case float64:
		return strconv.FormatFloat(x, 'g', 6, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', 6, 32)
	case string:
		return x
	default:
		rv := reflect.ValueOf(x)
		if rv.Kind() == reflect.Slice {
			parts := make([]string, rv.Len())
			for i := range parts {
				parts[i] = text(rv.Index(i).Interface())
			}
			return "[" + strings.Join(parts, " ") + "]"
		}
		return fmt.Sprint(x)
	}
}

// jsonValue makes a value JSON-safe: times in RFC 3339, NaN and infinities
// as null.
func jsonValue(v any) any {
	switch x := deref(v).(type) {
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case nil:
		return nil
	default:
		return x
	}
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	return rv.Interface()
}

// EventWindow looks up incident id and returns its subject and the window
// around it: from a quarter of its length (at least five minutes) before
// the onset to as long after its end (or its last detection while open).
func EventWindow(ctx context.Context, conn chdb.Conn, id string) (Params, error) {
	var (
		node, device string
		port         uint16
		startMs      int64
		endMs        *int64
		lastMs       int64
	)
	err := conn.QueryRow(ctx, `SELECT subject_node, subject_device, subject_port, start_ms, end_ms, last_detected_at_ms
FROM events_latest WHERE id = @id`, ch.Named("id", id)).Scan(&node, &device, &port, &startMs, &endMs, &lastMs)
	if err != nil {
		return Params{}, fmt.Errorf("event %q: %w", id, err)
	}
	end := lastMs
	if endMs != nil {
		end = *endMs
	}
	pad := max((end-startMs)/4, 5*60*1000)
	return Params{
		From: time.UnixMilli(startMs - pad).UTC().Truncate(time.Second),
		To:   time.UnixMilli(end + pad).UTC().Truncate(time.Second).Add(time.Second),
		Node: node, Device: device, Port: int(port),
	}, nil
}

// DataRange is the span of data time the database holds: samples and
// incidents. ok is false when it holds nothing.
func DataRange(ctx context.Context, conn chdb.Conn) (from, to time.Time, ok bool, err error) {
	var sMin, sMax, eMin, eMax int64
	if err := conn.QueryRow(ctx, `SELECT min(time_ms), max(time_ms) FROM port_samples`).Scan(&sMin, &sMax); err != nil {
		return from, to, false, fmt.Errorf("data range: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT min(start_ms), max(last_detected_at_ms) FROM events_latest`).Scan(&eMin, &eMax); err != nil {
		return from, to, false, fmt.Errorf("data range: %w", err)
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, r := range [][2]int64{{sMin, sMax}, {eMin, eMax}} {
		if r[1] > 0 {
			lo, hi = min(lo, r[0]), max(hi, r[1])
		}
	}
	if hi == 0 {
		return from, to, false, nil
	}
	return time.UnixMilli(lo).UTC().Truncate(time.Second), time.UnixMilli(hi).UTC().Truncate(time.Second).Add(time.Second), true, nil
}
