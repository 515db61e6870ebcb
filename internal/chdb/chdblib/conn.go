//go:build chdb

package chdblib

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// Conn is a chdb.Conn on the chDB library, working in one database.
type Conn struct {
	s  *session
	db string
}

var _ chdb.Conn = (*Conn)(nil)

// Open loads the library at libPath (once per process), opens the engine on
// dataDir and returns a connection working in database db (created when
// missing). The session runs in UTC, as the 18.16 test server does, and
// writes NaN and infinities into JSON as the native protocol carries them.
func Open(libPath, dataDir, db string) (*Conn, error) {
	if err := load(libPath); err != nil {
		return nil, err
	}
	s, err := connect(dataDir)
	if err != nil {
		return nil, err
	}
	c := &Conn{s: s, db: db}
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS `" + db + "`",
		"USE `" + db + "`",
		"SET session_timezone = 'UTC'",
		"SET output_format_json_quote_denormals = 1",
		"SET output_format_json_quote_64bit_integers = 1",
		"SET date_time_input_format = 'best_effort'",
	} {
		if _, err := s.run(stmt, "TabSeparated"); err != nil {
			s.close()
			return nil, fmt.Errorf("chdb: %s: %w", stmt, err)
		}
	}
	return c, nil
}

// Version is the library's ClickHouse release (SELECT version()).
func (c *Conn) Version() (string, error) {
	out, err := c.s.run("SELECT version()", "TabSeparated")
	return strings.TrimSpace(string(out)), err
}

// Close ends the session.
func (c *Conn) Close() error { c.s.close(); return nil }

// Exec runs a statement whose output is not read.
func (c *Conn) Exec(ctx context.Context, query string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stmt, err := bind(query, args)
	if err != nil {
		return err
	}
	_, err = c.s.run(stmt, "TabSeparated")
	return err
}

// Query runs a SELECT and reads every row (the results rdmawatch reads are
// small: reports, not exports).
func (c *Conn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stmt, err := bind(query, args)
	if err != nil {
		return nil, err
	}
	out, err := c.s.run(stmt, "JSONCompactEachRowWithNamesAndTypes")
	if err != nil {
		return nil, err
	}
	return decodeRows(out)
}

// QueryRow is Query's first row; no row is sql.ErrNoRows, as clickhouse-go.
func (c *Conn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return &row{err: err}
	}
	return &row{rows: rows.(*result)}
}

var insertRE = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+([A-Za-z0-9_.` + "`" + `]+)\s*\(([^)]*)\)\s*$`)

// PrepareBatch takes "INSERT INTO table (a, b, ...)". The column types come
// from system.columns, so values are written in the form each type reads.
func (c *Conn) PrepareBatch(ctx context.Context, query string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	m := insertRE.FindStringSubmatch(query)
	if m == nil {
		return nil, fmt.Errorf("chdb: batch %q: want INSERT INTO table (columns)", query)
	}
	table := strings.Trim(m[1], "`")
	var cols []string
	for _, col := range strings.Split(m[2], ",") {
		cols = append(cols, strings.Trim(strings.TrimSpace(col), "`"))
	}
	rows, err := c.Query(ctx, "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = @t", ch.Named("t", table))
	if err != nil {
		return nil, fmt.Errorf("chdb: batch into %s: %w", table, err)
	}
	types := map[string]string{}
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return nil, err
		}
		types[n] = t
	}
	b := &batch{c: c, query: strings.TrimSpace(query), table: table, cols: cols, types: make([]string, len(cols)), byCol: make([][]any, len(cols))}
	for i, col := range cols {
		t, ok := types[col]
		if !ok {
			return nil, &ch.Exception{Code: 16, Message: fmt.Sprintf("No such column %s in table %s", col, table)}
		}
		b.types[i] = t
	}
	return b, nil
}

// errRE reads the server's error text: "Code: 60. DB::Exception: ...".
var errRE = regexp.MustCompile(`(?s)Code:\s*(\d+)\.\s*(?:DB::Exception:\s*)?(.*)`)

// serverError makes the library's error text a *ch.Exception, as the native
// protocol reports it, so code that branches on codes (migrate's "column
// exists", "table exists") branches the same way.
func serverError(msg string) error {
	m := errRE.FindStringSubmatch(msg)
	if m == nil {
		return errors.New("chdb: " + strings.TrimSpace(msg))
	}
	code, _ := strconv.Atoi(m[1])
	return &ch.Exception{Code: int32(code), Name: "DB::Exception", Message: strings.TrimSpace(m[2])}
}

// bind replaces @name (driver.NamedValue args) or ? (positional args)
// outside quoted text with SQL literals: clickhouse-go's client-side
// binding, which rdmawatch uses on every server.
func bind(query string, args []any) (string, error) {
	if len(args) == 0 {
		return query, nil
	}
	named := map[string]any{}
	var positional []any
	for _, a := range args {
		if nv, ok := a.(driver.NamedValue); ok {
			named[nv.Name] = nv.Value
		} else {
			positional = append(positional, a)
		}
	}
	var out strings.Builder
	next := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '`' || c == '"':
			j := i + 1
			for j < len(query) && query[j] != c {
				if query[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(query) {
				j = len(query) - 1
			}
			out.WriteString(query[i : j+1])
			i = j
		case c == '@' && len(named) > 0:
			j := i + 1
			for j < len(query) && (query[j] == '_' || query[j] >= 'a' && query[j] <= 'z' || query[j] >= 'A' && query[j] <= 'Z' || query[j] >= '0' && query[j] <= '9') {
				j++
			}
			v, ok := named[query[i+1:j]]
			if !ok {
				return "", fmt.Errorf("chdb: bind: no value for %s", query[i:j])
			}
			lit, err := literal(v)
			if err != nil {
				return "", fmt.Errorf("chdb: bind %s: %w", query[i:j], err)
			}
			out.WriteString(lit)
			i = j - 1
		case c == '?' && len(positional) > 0:
			if next >= len(positional) {
				return "", fmt.Errorf("chdb: bind: more ? than the %d arguments", len(positional))
			}
			lit, err := literal(positional[next])
			if err != nil {
				return "", fmt.Errorf("chdb: bind argument %d: %w", next+1, err)
			}
			next++
			out.WriteString(lit)
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}

var quoter = strings.NewReplacer(`\`, `\\`, `'`, `\'`)

// literal renders a bound value as clickhouse-go's binder does.
func literal(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		return "'" + quoter.Replace(x) + "'", nil
	case time.Time:
		return "toDateTime('" + x.UTC().Format("2006-01-02 15:04:05") + "', 'UTC')", nil
	case bool:
		if x {
			return "1", nil
		}
		return "0", nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(rv.Float(), 'g', -1, 64), nil
	case reflect.Slice:
		parts := make([]string, rv.Len())
		for i := range parts {
			p, err := literal(rv.Index(i).Interface())
			if err != nil {
				return "", err
			}
			parts[i] = p
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case reflect.Pointer:
		if rv.IsNil() {
			return "NULL", nil
		}
		return literal(rv.Elem().Interface())
	}
	return "", fmt.Errorf("value %v of type %T", v, v)
}

// result holds a query's rows as decoded JSON, converted on Scan.
type result struct {
	names, types []string
	rows         [][]any
	i            int
	err          error
}

func decodeRows(out []byte) (*result, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	r := &result{i: -1}
	if len(bytes.TrimSpace(out)) == 0 {
		return r, nil
	}
	if err := dec.Decode(&r.names); err != nil {
		return nil, fmt.Errorf("chdb: result names: %w", err)
	}
	if err := dec.Decode(&r.types); err != nil {
		return nil, fmt.Errorf("chdb: result types: %w", err)
	}
	for dec.More() {
		var row []any
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("chdb: result row %d: %w", len(r.rows)+1, err)
		}
		r.rows = append(r.rows, row)
	}
	return r, nil
}

func (r *result) Next() bool { r.i++; return r.i < len(r.rows) }
func (r *result) Scan(dest ...any) error {
	if r.i < 0 || r.i >= len(r.rows) {
		return fmt.Errorf("chdb: Scan without a row")
	}
	if len(dest) != len(r.names) {
		return fmt.Errorf("chdb: Scan into %d values, the result has %d columns", len(dest), len(r.names))
	}
	for k, d := range dest {
		dv := reflect.ValueOf(d)
		if dv.Kind() != reflect.Pointer || dv.IsNil() {
			return fmt.Errorf("chdb: Scan column %s: destination %T is not a pointer", r.names[k], d)
		}
		if err := assign(dv.Elem(), r.rows[r.i][k], r.types[k]); err != nil {
			return fmt.Errorf("chdb: column %s (%s): %w", r.names[k], r.types[k], err)
		}
	}
	return nil
}
func (r *result) ScanStruct(any) error { return errors.New("chdb: ScanStruct is not supported") }
func (r *result) Totals(...any) error  { return nil }
func (r *result) Columns() []string    { return r.names }
func (r *result) Close() error         { return nil }
func (r *result) Err() error           { return r.err }
func (r *result) HasData() bool        { return len(r.rows) > 0 }
func (r *result) ColumnTypes() []driver.ColumnType {
	out := make([]driver.ColumnType, len(r.names))
	for i := range r.names {
		out[i] = colType{name: r.names[i], typ: r.types[i]}
	}
	return out
}

type colType struct{ name, typ string }

func (c colType) Name() string             { return c.name }
func (c colType) Nullable() bool           { return strings.HasPrefix(c.typ, "Nullable(") }
func (c colType) ScanType() reflect.Type   { return scanType(c.typ) }
func (c colType) DatabaseTypeName() string { return c.typ }

type row struct {
	rows *result
	err  error
}

func (r *row) Err() error { return r.err }
func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if !r.rows.Next() {
		return sql.ErrNoRows
	}
	return r.rows.Scan(dest...)
}
func (r *row) ScanStruct(any) error { return errors.New("chdb: ScanStruct is not supported") }

// inner strips one wrapper "Name(" ... ")" from a type.
func inner(typ, wrapper string) (string, bool) {
	if strings.HasPrefix(typ, wrapper+"(") && strings.HasSuffix(typ, ")") {
		return typ[len(wrapper)+1 : len(typ)-1], true
	}
	return typ, false
}

// scanType is the Go type clickhouse-go scans a ClickHouse type into.
func scanType(typ string) reflect.Type {
	if t, ok := inner(typ, "LowCardinality"); ok {
		return scanType(t)
	}
	if t, ok := inner(typ, "Nullable"); ok {
		return reflect.PointerTo(scanType(t))
	}
	if t, ok := inner(typ, "Array"); ok {
		return reflect.SliceOf(scanType(t))
	}
	base := typ
	if i := strings.IndexByte(base, '('); i >= 0 {
		base = base[:i]
	}
	switch base {
	case "UInt8":
		return reflect.TypeOf(uint8(0))
	case "UInt16":
		return reflect.TypeOf(uint16(0))
	case "UInt32":
		return reflect.TypeOf(uint32(0))
	case "UInt64":
		return reflect.TypeOf(uint64(0))
	case "Int8":
		return reflect.TypeOf(int8(0))
	case "Int16":
		return reflect.TypeOf(int16(0))
	case "Int32":
		return reflect.TypeOf(int32(0))
	case "Int64":
		return reflect.TypeOf(int64(0))
	case "Float32":
		return reflect.TypeOf(float32(0))
	case "Float64", "Decimal", "Decimal32", "Decimal64", "Decimal128":
		return reflect.TypeOf(float64(0))
	case "Bool":
		return reflect.TypeOf(false)
	case "DateTime", "DateTime64", "Date", "Date32":
		return reflect.TypeOf(time.Time{})
	}
	return reflect.TypeOf("")
}

var timeType = reflect.TypeOf(time.Time{})

// assign converts one JSON value of ClickHouse type typ into dst.
func assign(dst reflect.Value, v any, typ string) error {
	if t, ok := inner(typ, "LowCardinality"); ok {
		typ = t
	}
	if t, ok := inner(typ, "Nullable"); ok {
		typ = t
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if v == nil {
			dst.SetZero()
			return nil
		}
		p := reflect.New(dst.Type().Elem())
		if err := assign(p.Elem(), v, typ); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	case reflect.Interface:
		p := reflect.New(scanType(typ))
		if err := assign(p.Elem(), v, typ); err != nil {
			return err
		}
		dst.Set(p.Elem())
		return nil
	}
	if v == nil {
		dst.SetZero()
		return nil
	}
	if dst.Type() == timeType {
		return assignTime(dst, v, typ)
	}
	return assignValue(dst, v, typ)
}

// assignTime parses a Date or DateTime value, which JSON carries as text
// in UTC, into the time.Time dst.
func assignTime(dst reflect.Value, v any, typ string) error {
	s := fmt.Sprint(v)
	layout := "2006-01-02 15:04:05.999999999"
	if strings.HasPrefix(typ, "Date") && !strings.HasPrefix(typ, "DateTime") {
		layout = "2006-01-02"
	}
	t, err := time.ParseInLocation(layout, s, time.UTC)
	if err != nil {
		return err
	}
	dst.Set(reflect.ValueOf(t))
	return nil
}

// assignValue converts a non-null value into a dst of a basic kind or a
// slice. A scalar is parsed from its text, the same whether JSON carried
// it as a string or as a number.
func assignValue(dst reflect.Value, v any, typ string) error {
	text := fmt.Sprint(v)
	switch dst.Kind() {
	case reflect.String:
		dst.SetString(text)
	case reflect.Bool:
		dst.SetBool(text == "true" || text == "1")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return err
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if text == "true" || text == "false" {
			text = map[string]string{"true": "1", "false": "0"}[text]
		}
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return err
		}
		dst.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := parseFloat(text)
		if err != nil {
			return err
		}
		dst.SetFloat(f)
	case reflect.Slice:
		return assignArray(dst, v, typ)
	default:
		return fmt.Errorf("cannot scan into %s", dst.Type())
	}
	return nil
}

// assignArray converts an Array(T) value into the slice dst, element by
// element.
func assignArray(dst reflect.Value, v any, typ string) error {
	items, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%v is not an array", v)
	}
	elem, _ := inner(typ, "Array")
	s := reflect.MakeSlice(dst.Type(), len(items), len(items))
	for i, it := range items {
		if err := assign(s.Index(i), it, elem); err != nil {
			return err
		}
	}
	dst.Set(s)
	return nil
}

func parseFloat(s string) (float64, error) {
	switch strings.ToLower(s) {
	case "nan", "-nan":
		return math.NaN(), nil
	case "inf", "+inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}

// batch collects rows (Append) or columns (Column(i).Append) and sends them
// as one INSERT ... FORMAT JSONCompactEachRow.
type batch struct {
	c           *Conn
	query       string
	table       string
	cols, types []string
	rows        [][]any
	byCol       [][]any
	sent        bool
}

func (b *batch) Append(v ...any) error {
	if len(v) != len(b.cols) {
		return fmt.Errorf("chdb: insert into %s: %d values for %d columns", b.table, len(v), len(b.cols))
	}
	b.rows = append(b.rows, append([]any(nil), v...))
	return nil
}
func (b *batch) AppendStruct(any) error { return errors.New("chdb: AppendStruct is not supported") }
func (b *batch) Column(i int) driver.BatchColumn {
	return &batchColumn{b: b, i: i}
}
func (b *batch) Flush() error                { return nil }
func (b *batch) IsSent() bool                { return b.sent }
func (b *batch) Rows() int                   { return len(b.rows) }
func (b *batch) Columns() []column.Interface { return nil }
func (b *batch) Abort() error                { b.sent = true; b.rows = nil; return nil }
func (b *batch) Close() error                { b.sent = true; return nil }

func (b *batch) Send() error {
	if b.sent {
		return errors.New("chdb: batch already sent")
	}
	b.sent = true
	rows := b.rows
	if n := len(b.byCol[0]); n > 0 {
		for r := 0; r < n; r++ {
			row := make([]any, len(b.cols))
			for c := range b.cols {
				if r >= len(b.byCol[c]) {
					return fmt.Errorf("chdb: insert into %s: column %s has %d values, %s has %d", b.table, b.cols[c], len(b.byCol[c]), b.cols[0], n)
				}
				row[c] = b.byCol[c][r]
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	var buf strings.Builder
	buf.WriteString(b.query)
	buf.WriteString(" FORMAT JSONCompactEachRow\n")
	for r, row := range rows {
		buf.WriteByte('[')
		for c, v := range row {
			if c > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(&buf, v, b.types[c]); err != nil {
				return fmt.Errorf("chdb: insert into %s row %d column %s: %w", b.table, r, b.cols[c], err)
			}
		}
		buf.WriteString("]\n")
	}
	_, err := b.c.s.run(buf.String(), "TabSeparated")
	return err
}

type batchColumn struct {
	b *batch
	i int
}

// Append takes a whole column (a slice), as the sink's block fill does.
func (c *batchColumn) Append(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return c.AppendRow(v)
	}
	for i := 0; i < rv.Len(); i++ {
		c.b.byCol[c.i] = append(c.b.byCol[c.i], rv.Index(i).Interface())
	}
	return nil
}
func (c *batchColumn) AppendRow(v any) error {
	c.b.byCol[c.i] = append(c.b.byCol[c.i], v)
	return nil
}

// writeJSON writes v in the JSON form a column of type typ reads.
func writeJSON(w *strings.Builder, v any, typ string) error {
	if t, ok := inner(typ, "LowCardinality"); ok {
		typ = t
	}
	if t, ok := inner(typ, "Nullable"); ok {
		typ = t
	}
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			w.WriteString("null")
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		w.WriteString("null")
		return nil
	}
	switch x := rv.Interface().(type) {
	case time.Time:
		layout := "2006-01-02 15:04:05"
		if strings.HasPrefix(typ, "DateTime64(") {
			p, _ := strconv.Atoi(strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(typ, "DateTime64("), ")"), ",", 2)[0])
			if p > 0 {
				layout += "." + strings.Repeat("0", p)
			}
		} else if strings.HasPrefix(typ, "Date") && !strings.HasPrefix(typ, "DateTime") {
			layout = "2006-01-02"
		}
		w.WriteString(`"` + x.UTC().Format(layout) + `"`)
		return nil
	case float64:
		return writeFloat(w, x)
	case float32:
		return writeFloat(w, float64(x))
	case bool:
		if x {
			w.WriteString("1")
		} else {
			w.WriteString("0")
		}
		return nil
	}
	if rv.Kind() == reflect.Slice && (rv.Type().Elem().Kind() != reflect.Uint8 || strings.HasPrefix(typ, "Array(")) {
		elem, _ := inner(typ, "Array")
		w.WriteByte('[')
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, rv.Index(i).Interface(), elem); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	b, err := json.Marshal(rv.Interface())
	if err != nil {
		return err
	}
	w.Write(b)
	return nil
}

func writeFloat(w *strings.Builder, f float64) error {
	switch {
	case math.IsNaN(f):
		w.WriteString(`"nan"`)
	case math.IsInf(f, 1):
		w.WriteString(`"inf"`)
	case math.IsInf(f, -1):
		w.WriteString(`"-inf"`)
	default:
		w.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return nil
}
