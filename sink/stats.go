package sink

// TableStats is what the sink did for one table since it started.
type TableStats struct {
	// Rows is the rows ClickHouse accepted; Inserts the INSERT blocks that
	// carried them, InsertErrors every ClickHouse call of the write path
	// that failed (INSERT attempts, and the calls before them: the check
	// for rows already there, the wait for failed INSERTs to end),
	// CheckErrors the part of them that were not INSERTs. While ClickHouse
	// is away the first call of a retried flush is often the check, so
	// counting INSERTs alone showed no error through an outage.
	// InsertSeconds is the time all INSERT attempts took
	// (Config.ObserveInsert sees each one).
	Rows, Inserts, InsertErrors, CheckErrors uint64
	InsertSeconds                            float64
	// Retries counts flushes that failed and were tried again later.
	Retries uint64
	// Acked is the messages written and acknowledged.
	Acked uint64
	// Pending and PendingRows are what the sink holds, fetched and not
	// acked yet (a gauge).
	Pending, PendingRows int
	// ConsumerPending is the messages the table's durable consumer has
	// not delivered yet (JetStream's num_pending), as of the last
	// heartbeat: the backlog every sink of the consumer shares (a gauge).
	ConsumerPending uint64
	// DeadLettered is the messages copied to the dead-letter stream: Poison
	// (undecodable or panicking), Spoofed (node not its subject's),
	// Implausible (a sample's data time far from the message's store time,
	// Config.MaxAhead and MaxBehind; ImplausibleRows rows) and Refused
	// (ClickHouse or its driver refused the values, RefusedRows rows)
	// together.
	DeadLettered, Poison, Spoofed, Refused, RefusedRows uint64
	Implausible, ImplausibleRows                        uint64
	// DuplicateRows is the rows of redelivered messages skipped because
	// the table had them already.
	DuplicateRows uint64
}

// Stats is one snapshot of every table's TableStats, keyed by table
// (port_samples, events, inventory, port_config).
type Stats map[string]TableStats

type statser interface {
	snapshot() (string, TableStats)
	// writeError is why the pipeline's last write failed ("" when it
	// succeeded, or none failed since the start).
	writeError() string
}

// Stats returns what the sink did so far; empty before Run.
func (s *Sink) Stats() Stats {
	out := Stats{}
	s.pipesMu.Lock()
	pipes := s.pipes
	s.pipesMu.Unlock()
	for _, p := range pipes {
		name, st := p.snapshot()
		out[name] = st
	}
	return out
}

// RollupStats is what the sink's roller (rollup.go) did for one rollup
// since the sink started.
type RollupStats struct {
	// Rolls are the INSERT ... SELECT that rolled a run of minutes or
	// hours, Failures those that failed (tried again at the next tick),
	// Seconds the time all of them took.
	Rolls, Failures uint64
	Seconds         float64
	// Pending is the minutes or hours noted and not rolled yet (a gauge).
	Pending int
}

// RollupStats returns one snapshot per rollup, keyed "minute", "hour" and "day";
// empty when the sink does not roll (RollupEvery < 0).
func (s *Sink) RollupStats() map[string]RollupStats {
	if s.roll == nil {
		return map[string]RollupStats{}
	}
	return s.roll.snapshots()
}
