package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
	"github.com/rdmawatch/rdmawatch/internal/retry"
)

// tableSpec is what the writer knows of one table and its rows.
type tableSpec[R any] struct {
	name    string
	columns []string
	values  func(*R) []any
	// block, when set, fills a batch column by column (no boxing per
	// value); values then only serves to find a row the driver refuses.
	// sent reports whether part of the rows went to the server before an
	// error (sampleBlocks.fill).
	block func(b driver.Batch, rows []*R) (sent bool, err error)
	// present, when set, reports which rows are in the table already. The
	// counters table has one: the minute rollup reads port_samples without
	// FINAL (sink/rollup.go), so a row inserted twice would count twice
	// until a merge.
	present func(ctx context.Context, rows []*R) ([]bool, error)
	// order, when set, sorts the rows of an INSERT by the table's sorting
	// key: ClickHouse writes a block already in order as it is, and
	// otherwise permutes every column of it.
	order func(rows []*R)
	// stored, when set, is told the rows of each message the table has
	// (the counters table notes their minutes for the rollups).
	stored func(rows []R)
}

// tableWriter writes the batches of a jsbatch.Consumer into one ClickHouse
// table: the rows already there are skipped, the rest goes in blocks of
// BlockRows; when ClickHouse refuses the values, the batch is bisected so
// the good messages land and the refused one is isolated (and rejected,
// so dead-lettered, after RefuseAttempts). Only the consumer's goroutine
// calls Write; stats and writeErr are read by others.
type tableWriter[R any] struct {
	tableSpec[R]
	conn driver.Conn
	cfg  Config
	log  *slog.Logger

	// writeErr is why the last write of this table failed ("" or nil: it
	// succeeded, or none failed): Ready reports it.
	writeErr atomic.Pointer[string]
	mu       sync.Mutex // guards stats
	stats    TableStats
	// inserts counts INSERT blocks accepted: proof that the table takes
	// rows, before a refused message is given up on.
	inserts uint64
	// refusals are the messages whose rows ClickHouse refused alone, until
	// they are written or rejected.
	refusals map[*jsbatch.Item[R]]*refusal
	queries  queryIDs
}

// refusal is how often ClickHouse refused one message's rows, alone.
type refusal struct {
	n    int
	mark uint64 // tableWriter.inserts when the first one began
	err  error  // the last
}

// queryIDs names the INSERTs of a table that has a check for rows already
// there, and remembers those that failed on the client's side and may still
// be running on the server.
type queryIDs struct {
	base        string
	n           uint64
	failed      []string
	failedSince time.Time
}

func newTableWriter[R any](conn driver.Conn, cfg Config, log *slog.Logger, spec tableSpec[R]) *tableWriter[R] {
	return &tableWriter[R]{tableSpec: spec, conn: conn, cfg: cfg, log: log, refusals: map[*jsbatch.Item[R]]*refusal{}}
}

// Write is one attempt at writing batch (jsbatch.Writer).
func (w *tableWriter[R]) Write(ctx context.Context, batch []*jsbatch.Item[R]) error {
	err := w.write(ctx, batch, w.inserts)
	// Give up on refused messages, now that this attempt may have proven
	// that the table takes other rows.
	for _, it := range batch {
		r := w.refusals[it]
		if it.Settled() || r == nil || r.n < w.cfg.RefuseAttempts || w.inserts <= r.mark {
			continue
		}
		w.count(func(st *TableStats) { st.Refused++; st.RefusedRows += uint64(len(it.Rows)) })
		w.reject(it, fmt.Sprintf("clickhouse refused its %d rows for %s %d times: %v", len(it.Rows), w.name, r.n, r.err))
	}
	left := 0
	for _, it := range batch {
		if !it.Settled() {
			left++
		}
	}
	if left == 0 {
		// Every message of the batch is in the table: the table takes
		// writes (also when every row was there already, and no INSERT
		// was needed).
		w.writeErr.Store(nil)
		return nil
	}
	if err == nil {
		// Only refused messages are left, waiting for proof or attempts.
		err = fmt.Errorf("%d messages refused by clickhouse, retrying", left)
	}
	return err
}

// written marks it stored.
func (w *tableWriter[R]) written(it *jsbatch.Item[R]) {
	if w.stored != nil {
		w.stored(it.Rows)
	}
	it.Written()
	delete(w.refusals, it)
}

// reject gives it up, for the dead-letter stream.
func (w *tableWriter[R]) reject(it *jsbatch.Item[R], reason string) {
	it.Reject(reason)
	delete(w.refusals, it)
}

// write inserts the rows of items that are not settled. On a refusal as
// data it bisects items; it returns the first error it could not isolate.
func (w *tableWriter[R]) write(ctx context.Context, items []*jsbatch.Item[R], mark uint64) error {
	err := w.insertItems(ctx, items)
	if err == nil {
		for _, it := range items {
			if !it.Settled() {
				w.written(it)
			}
		}
		return nil
	}
	// Some blocks may have landed before the error.
	for _, it := range items {
		it.Suspect = true
	}
	if !Refused(err) {
		return err
	}
	live := items[:0:0]
	for _, it := range items {
		if !it.Settled() {
			live = append(live, it)
		}
	}
	if len(live) == 1 {
		it := live[0]
		r := w.refusals[it]
		if r == nil {
			r = &refusal{mark: mark}
			w.refusals[it] = r
		}
		r.n++
		r.err = err
		w.log.Warn("sink: clickhouse refused one message's rows", "stream_seq", it.StreamSeq(), "subject", it.Subject(), "refusals", r.n, "err", err)
		return err
	}
	if len(live) == 0 {
		return nil
	}
	half := len(live) / 2
	err1 := w.write(ctx, live[:half], mark)
	if err1 != nil && !Refused(err1) {
		return err1
	}
	err2 := w.write(ctx, live[half:], mark)
	if err2 != nil {
		return err2
	}
	return err1
}

// rowRef is one row of an item.
type rowRef[R any] struct {
	it *jsbatch.Item[R]
	r  *R
}

// insertItems writes the rows of items not known to be in the table
// already, in blocks.
func (w *tableWriter[R]) insertItems(ctx context.Context, items []*jsbatch.Item[R]) error {
	var refs, suspects []rowRef[R]
	for _, it := range items {
		if it.Settled() {
			continue
		}
		for i := range it.Rows {
			r := rowRef[R]{it, &it.Rows[i]}
			if it.Suspect && w.present != nil {
				suspects = append(suspects, r)
				continue
			}
			refs = append(refs, r)
		}
	}
	if len(suspects) > 0 {
		absent, err := w.skipPresent(ctx, suspects)
		if err != nil {
			return err
		}
		refs = append(refs, absent...)
	}
	rows := make([]*R, len(refs))
	for i, r := range refs {
		rows[i] = r.r
	}
	if w.order != nil {
		w.order(rows)
	}
	block := w.cfg.BlockRows
	for start := 0; start < len(rows); start += block {
		end := min(start+block, len(rows))
		err := w.insert(ctx, rows[start:end:end])
		var bad *badRowError
		if errors.As(err, &bad) {
			// The driver refused a value before anything was sent: that
			// message can never be written.
			it := refs[slices.IndexFunc(refs, func(r rowRef[R]) bool { return r.r == rows[start+bad.row] })].it
			w.count(func(st *TableStats) { st.Refused++; st.RefusedRows += uint64(len(it.Rows)) })
			w.reject(it, err.Error())
			// Earlier blocks are in the table: everything goes again,
			// after the check for rows already there.
			for _, it := range items {
				it.Suspect = true
			}
			return w.insertItems(ctx, items)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// skipPresent returns the rows of suspects that the table does not hold,
// and marks written the items whose rows it holds all.
func (w *tableWriter[R]) skipPresent(ctx context.Context, suspects []rowRef[R]) ([]rowRef[R], error) {
	if err := w.waitFailedInserts(ctx); err != nil {
		if !errors.Is(err, errInsertsRunning) {
			w.callFailed(err)
		}
		return nil, err
	}
	rows := make([]*R, len(suspects))
	for i, r := range suspects {
		rows[i] = r.r
	}
	there, err := w.present(ctx, rows)
	if err != nil {
		err = fmt.Errorf("which redelivered rows are in %s already: %w", w.name, err)
		w.callFailed(err)
		return nil, err
	}
	var absent []rowRef[R]
	for i, r := range suspects {
		if !there[i] {
			absent = append(absent, r)
		}
	}
	if dup := uint64(len(suspects) - len(absent)); dup > 0 {
		w.count(func(st *TableStats) { st.DuplicateRows += dup })
		w.log.Info("sink: skipped rows already in the table (redelivered)", "rows", dup, "of", len(suspects))
	}
	// A message whose rows are all there is written: acked with this
	// batch even if the INSERT of the others fails, and not checked (nor
	// counted) again when they are retried.
	for i := 0; i < len(suspects); {
		it, all := suspects[i].it, true
		for ; i < len(suspects) && suspects[i].it == it; i++ {
			all = all && there[i]
		}
		if all {
			w.written(it)
		}
	}
	return absent, nil
}

// errInsertsRunning: INSERTs of the sink that failed on its side still run
// on the server. The server answers: that is no failed call.
var errInsertsRunning = errors.New("failed inserts still running on the server")

// failedInsertGrace bounds how long the sink waits for its failed INSERTs
// to leave the server before it checks for rows already there regardless.
// Killing them is no way out: a kill between the table's write and its
// materialized views' leaves rows the rollups never count.
const failedInsertGrace = time.Minute

// waitFailedInserts waits until no INSERT of this table that failed on the
// client's side (a timeout, a broken connection) still runs on the server:
// one that finished after the check for rows already there would add its
// rows twice to the rollups. It waits InsertTimeout per call and returns an
// error while they run (the write is retried later), at most
// failedInsertGrace in all; then it logs and lets the check go on.
func (w *tableWriter[R]) waitFailedInserts(ctx context.Context) error {
	q := &w.queries
	if len(q.failed) == 0 {
		return nil
	}
	if q.failedSince.IsZero() {
		q.failedSince = time.Now()
	}
	quoted := make([]string, len(q.failed))
	for i, id := range q.failed {
		quoted[i] = "'" + id + "'" // ids are ours: letters, digits, '-' and '_'
	}
	query := "SELECT count() FROM system.processes WHERE query_id IN (" + strings.Join(quoted, ", ") + ")"
	wctx, cancel := context.WithTimeout(ctx, w.cfg.InsertTimeout)
	defer cancel()
	var err error // the last answer: the inserts run, or the call failed
	for {
		var n uint64
		qerr := w.conn.QueryRow(wctx, query).Scan(&n)
		switch {
		case qerr == nil && n == 0:
			q.failed, q.failedSince = q.failed[:0], time.Time{}
			return nil
		case qerr == nil:
			err = fmt.Errorf("%w: %d", errInsertsRunning, n)
		case err == nil || wctx.Err() == nil:
			// Not the wait's own deadline cutting a call short after the
			// server said they run.
			err = qerr
		}
		if wctx.Err() != nil {
			if time.Since(q.failedSince) > failedInsertGrace {
				w.log.Warn("sink: failed inserts may still run on the server; checking for rows already there regardless (the rollups may count them twice)",
					"queries", len(q.failed), "waited", time.Since(q.failedSince), "err", err)
				q.failed, q.failedSince = q.failed[:0], time.Time{}
				return nil
			}
			return fmt.Errorf("waiting for failed inserts into %s to end: %w", w.name, err)
		}
		_ = retry.Sleep(wctx, 50*time.Millisecond)
	}
}

// badRowError is a row the driver rejected while building the batch.
type badRowError struct {
	row int // in the block
	err error
}

func (e *badRowError) Error() string {
	return "row rejected by the clickhouse driver: " + e.err.Error()
}
func (e *badRowError) Unwrap() error { return e.err }

// insert writes one block.
func (w *tableWriter[R]) insert(ctx context.Context, rows []*R) error {
	start := time.Now()
	err := w.insertBlock(ctx, rows)
	took := time.Since(start)
	if obs := w.cfg.ObserveInsert; obs != nil {
		obs(w.name, len(rows), took, err)
	}
	w.count(func(st *TableStats) {
		st.InsertSeconds += took.Seconds()
		if err != nil {
			st.InsertErrors++
			return
		}
		st.Inserts++
		st.Rows += uint64(len(rows))
	})
	var bad *badRowError
	switch {
	case err == nil:
		w.inserts++
		w.writeErr.Store(nil)
	case Refused(err) || errors.As(err, &bad):
		// One message's values: the table takes others (its message is
		// isolated and dead-lettered), so the sink can still write.
	default:
		w.setWriteErr(err)
	}
	return err
}

// callFailed counts a ClickHouse call of the write path before the INSERT
// that failed, and says so in Ready until a write succeeds.
func (w *tableWriter[R]) callFailed(err error) {
	w.count(func(st *TableStats) { st.InsertErrors++; st.CheckErrors++ })
	w.setWriteErr(err)
}

func (w *tableWriter[R]) setWriteErr(err error) {
	r := w.name + ": the last write failed: " + err.Error()
	w.writeErr.Store(&r)
}

func (w *tableWriter[R]) writeError() string {
	if r := w.writeErr.Load(); r != nil {
		return *r
	}
	return ""
}

// count changes the stats under the lock snapshot takes.
func (w *tableWriter[R]) count(f func(*TableStats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// snapshot is the writer's part of the table's stats.
func (w *tableWriter[R]) snapshot() TableStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

func (w *tableWriter[R]) insertBlock(ctx context.Context, rows []*R) (err error) {
	ictx, cancel := context.WithTimeout(ctx, w.cfg.InsertTimeout)
	defer cancel()
	// sent: a first attempt sent part of the rows before it failed.
	var sent bool
	var ids []string
	defer func() {
		var bad *badRowError
		if err != nil && (sent || !errors.As(err, &bad)) {
			w.queries.failed = append(w.queries.failed, ids...)
		}
	}()
	batch, err := w.prepare(ictx, &ids)
	if err != nil {
		return err
	}
	defer func() { _ = batch.Close() }()
	filled := false
	if w.block != nil {
		var berr error
		sent, berr = w.block(batch, rows)
		if filled = berr == nil; !filled {
			// A column the driver refused: start again row by row, which
			// names the row (and so the message) it cannot take. (A chunk
			// that could not be sent fails the new batch too.)
			_ = batch.Abort()
			if batch, err = w.prepare(ictx, &ids); err != nil {
				return err
			}
		}
	}
	if !filled {
		for i, r := range rows {
			if err := batch.Append(w.values(r)...); err != nil {
				_ = batch.Abort()
				return &badRowError{row: i, err: fmt.Errorf("%s row %d: %w", w.name, i, err)}
			}
		}
		if sent {
			// Part of the rows reached the server in the first attempt:
			// they go again only after the check for rows already there.
			_ = batch.Abort()
			return fmt.Errorf("insert %d rows into %s: the driver failed after part of them was sent, and takes every row alone", len(rows), w.name)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", len(rows), w.name, err)
	}
	return nil
}

// prepare starts one INSERT attempt; ids gets its query id, if it has one.
func (w *tableWriter[R]) prepare(ctx context.Context, ids *[]string) (driver.Batch, error) {
	if w.present != nil {
		// A named query, so that after a failure the check for rows
		// already there can wait until the server is really done with
		// it; each attempt its own (one id runs once at a time).
		if w.queries.base == "" {
			w.queries.base = fmt.Sprintf("rdmawatch-sink-%s-%d", w.name, time.Now().UnixNano())
		}
		w.queries.n++
		id := fmt.Sprintf("%s-%d", w.queries.base, w.queries.n)
		*ids = append(*ids, id)
		ctx = ch.Context(ctx, ch.WithQueryID(id))
	}
	// An explicit column list: 18.16 rejects the driver's column-less
	// form, and INSERT ... VALUES through Exec hangs on it.
	batch, err := w.conn.PrepareBatch(ctx, "INSERT INTO "+w.name+" ("+strings.Join(w.columns, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("prepare insert into %s: %w", w.name, err)
	}
	return batch, nil
}
