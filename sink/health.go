package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// probeQuery asks what the sink must know to write: that ClickHouse
// answers, and whether the sink's user may write at all (readonly 1 or 2
// refuses every INSERT; system.settings has it on every server the sink
// supports, 18.16 included). A user whose grants lack INSERT (newer
// servers) answers 0 here: its first INSERT fails, and Ready says so.
const probeQuery = "SELECT value FROM system.settings WHERE name = 'readonly'"

// probeLoop probes ClickHouse every ProbeEvery until ctx ends.
func (s *Sink) probeLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ProbeEvery)
	defer t.Stop()
	for {
		s.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe records in probeErr why the sink cannot write, or clears it. A
// table whose last write failed stays not ready after a good probe: only a
// write of its own proves that it takes rows again.
func (s *Sink) probe(ctx context.Context) {
	// Not bounded by ProbeEvery: a probe slower than that only delays the
	// next one (the ticker drops ticks), and a short bound on a loaded
	// server would make readiness flap.
	pctx, cancel := context.WithTimeout(ctx, min(s.cfg.InsertTimeout, 5*time.Second))
	defer cancel()
	var readonly string
	err := s.conn.QueryRow(pctx, probeQuery).Scan(&readonly)
	if ctx.Err() != nil {
		return // stopping: the probe's error says nothing
	}
	var reason string
	switch {
	case err != nil:
		reason = "clickhouse does not answer: " + err.Error()
	case readonly != "0":
		reason = fmt.Sprintf("clickhouse user is read-only (readonly=%s): the sink cannot insert", readonly)
	}
	old := s.probeErr.Swap(&reason)
	switch was := old != nil && *old != ""; {
	case reason != "" && !was:
		s.log.Warn("sink: not ready: "+reason, "retry_in", s.cfg.ProbeEvery)
	case reason == "" && was:
		s.log.Info("sink: clickhouse answers again")
	}
}

// maxSeedAhead bounds the data clock a start reads from port_samples: a
// simulated fleet runs at most its duration ahead of the wall clock (an
// hour by default, two for the longest scenario), and a row stored far
// ahead (before its time was checked) must not open the window for ever.
const maxSeedAhead = 24 * time.Hour

// seedDataClock sets the data clock from the newest day partition data of
// port_samples (system.parts, no scan of the table): a sink restarted while
// a simulated fleet runs ahead of the wall clock must not refuse its next
// samples for being ahead of their store time.
func (s *Sink) seedDataClock(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, s.cfg.InsertTimeout)
	defer cancel()
	limit := time.Now().Add(maxSeedAhead).Unix()
	// port_samples_local: the table under the Distributed one in cluster
	// mode (internal/chdb/README.md).
	q := fmt.Sprintf(`SELECT max(toUInt32(max_time)) FROM system.parts
WHERE database = currentDatabase() AND table IN ('port_samples', 'port_samples_local') AND active
  AND toUInt32(max_time) <= %d`, limit)
	var newest uint32
	if err := s.conn.QueryRow(qctx, q).Scan(&newest); err != nil {
		return fmt.Errorf("sink: newest data time in port_samples: %w", err)
	}
	if ms := int64(newest) * 1000; ms > s.dataClock.Load() {
		s.dataClock.Store(ms)
	}
	return nil
}

// checkSampleTimes refuses a counters message with a sample whose data time
// is implausible for its store time (schemas.TimeBounds, the rule the
// processor applies); else it moves the data clock to the message's newest
// sample. The whole message is refused: its samples share a host's clock,
// and a message that mixes plausible times with implausible ones was not
// written by a collector reading its ports.
func (s *Sink) checkSampleTimes(meta *jetstream.MsgMetadata, rows []SampleRow) error {
	var stored schemas.Millis
	if meta != nil {
		stored = schemas.MillisOf(meta.Timestamp)
	}
	return s.checkTimes(stored, rows)
}

// checkTimes is checkSampleTimes for a message stored at stored (0:
// unknown).
func (s *Sink) checkTimes(stored schemas.Millis, rows []SampleRow) error {
	b := schemas.TimeBounds{Clock: schemas.Millis(s.dataClock.Load()), Stored: stored, MaxAhead: s.cfg.MaxAhead, MaxBehind: s.cfg.MaxBehind}
	var (
		bad, ahead int
		first      error
		where      *SampleRow
		newest     int64
	)
	aheadLimit := b.AheadLimit()
	for i := range rows {
		r := &rows[i]
		if err := b.Check(schemas.Millis(r.TimeMs)); err != nil {
			if bad == 0 {
				first, where = err, r
			}
			bad++
			if aheadLimit > 0 && schemas.Millis(r.TimeMs) > aheadLimit {
				ahead++
			}
			continue
		}
		newest = max(newest, r.TimeMs)
	}
	if bad > 0 {
		err := fmt.Errorf("%w: %d of %d samples; first: port %s/%d, %w", schemas.ErrImplausibleTime, bad, len(rows), where.Device, where.Port, first)
		if ahead == bad && s.suspect != nil && s.suspect.Active() {
			// Only ahead, and in the window after a start: the clock was
			// seeded from what ClickHouse holds, and the newer messages
			// come at once while the older ones a killed sink held come
			// back only after AckWait. Judge it when it returns.
			return fmt.Errorf("%w: %w", jsbatch.ErrLater, err)
		}
		return err
	}
	// Only the fetcher moves it (one per pipeline, and only the counters
	// pipeline checks): no lost update.
	if newest > s.dataClock.Load() {
		s.dataClock.Store(newest)
	}
	return nil
}
