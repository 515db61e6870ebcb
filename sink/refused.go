package sink

import (
	"context"
	"errors"
	"fmt"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
)

// refusedCodes are ClickHouse exception codes (ErrorCodes.cpp) that mean
// "these values": parsing, conversion, range, an expression on the data
// that threw. Every other error (a connection refused or reset, a timeout,
// TOO_MANY_PARTS, MEMORY_LIMIT_EXCEEDED, a missing table or column, no
// permission) is the server's or the schema's state, not the message's: the
// sink retries it with backoff forever and dead-letters nothing.
var refusedCodes = map[int32]string{
	6:   "CANNOT_PARSE_TEXT",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	38:  "CANNOT_PARSE_DATE",
	41:  "CANNOT_PARSE_DATETIME",
	53:  "TYPE_MISMATCH",
	69:  "ARGUMENT_OUT_OF_BOUND",
	70:  "CANNOT_CONVERT_TYPE",
	72:  "CANNOT_PARSE_NUMBER",
	117: "INCORRECT_DATA",
	128: "TOO_LARGE_ARRAY_SIZE",
	131: "TOO_LARGE_STRING_SIZE",
	190: "SIZES_OF_ARRAYS_DOESNT_MATCH",
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	395: "FUNCTION_THROW_IF_VALUE_IS_NON_ZERO",
	469: "VIOLATED_CONSTRAINT",
}

// Refused reports whether err is ClickHouse refusing the values of an
// INSERT (see refusedCodes), as opposed to the server being away, slow or
// misconfigured.
func Refused(err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) {
		return false
	}
	_, ok := refusedCodes[exc.Code]
	return ok
}

// sampleKey is port_samples' ORDER BY key: rows with one key collapse
// under FINAL, so the rollups must count one of them.
type sampleKey struct {
	node, device string
	port         uint16
	timeMs       int64
}

// keysTable is the external table the check for present rows sends.
const keysTable = "rdmawatch_sink_keys"

// samplesPresent reports which rows port_samples holds already (by its key).
// One query for all of them: the keys go as an external table (no query
// size limit), the ts range prunes partitions and node the primary key.
func (s *Sink) samplesPresent(ctx context.Context, rows []*SampleRow) ([]bool, error) {
	tbl, err := ext.NewTable(keysTable,
		ext.Column("node", "String"), ext.Column("device", "String"),
		ext.Column("port", "UInt16"), ext.Column("time_ms", "Int64"))
	if err != nil {
		return nil, err
	}
	want := make(map[sampleKey]int, len(rows))
	lo, hi := dateTime(rows[0].TimeMs).Unix(), dateTime(rows[0].TimeMs).Unix()
	for i, r := range rows {
		k := sampleKey{r.Node, r.Device, r.Port, r.TimeMs}
		if _, ok := want[k]; ok {
			continue
		}
		want[k] = i
		if err := tbl.Append(r.Node, r.Device, r.Port, r.TimeMs); err != nil {
			return nil, fmt.Errorf("keys table: %w", err)
		}
		ts := dateTime(r.TimeMs).Unix()
		lo, hi = min(lo, ts), max(hi, ts)
	}
	qctx, cancel := context.WithTimeout(ctx, s.cfg.InsertTimeout)
	defer cancel()
	qctx = ch.Context(qctx, ch.WithExternalTable(tbl))
	q := fmt.Sprintf(`SELECT node, device, port, time_ms FROM port_samples
WHERE ts >= toDateTime(%d) AND ts <= toDateTime(%d)
  AND node IN (SELECT node FROM %s)
  AND (node, device, port, time_ms) IN %s`, lo, hi, keysTable, keysTable)
	res, err := s.conn.Query(qctx, q)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	there := make([]bool, len(rows))
	found := map[sampleKey]bool{}
	for res.Next() {
		var k sampleKey
		if err := res.Scan(&k.node, &k.device, &k.port, &k.timeMs); err != nil {
			return nil, err
		}
		found[k] = true
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	// Within rows too, a key counts once: the first row of a key is
	// written (unless the table has it), its repeats are not.
	seen := make(map[sampleKey]bool, len(rows))
	for i, r := range rows {
		k := sampleKey{r.Node, r.Device, r.Port, r.TimeMs}
		there[i] = found[k] || seen[k]
		seen[k] = true
	}
	return there, nil
}
