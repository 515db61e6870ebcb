package judged

import "github.com/rdmawatch/rdmawatch/processor"

// What the external tests (package judged_test, which imports the
// detectors built on the engine) read of its internals.

// Max is judgedMax.
const Max = judgedMax

// CounterCount is how many counters the engine reads.
func (j *Engine) CounterCount() int { return len(j.counters()) }

// Track is the engine's tracker, made with its policy.
func (j *Engine) Track() *processor.Tracker { return j.track() }
