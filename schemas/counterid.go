package schemas

// CounterIDs is the size of the counter dictionary: ids run from 0 to
// CounterIDs-1. It only grows (the dictionary is append only).
const CounterIDs = len(counterDict)

// Source is where the counter of this id is read; id must be below CounterIDs.
func (id CounterID) Source() Source { return counterDict[id].src }

// Name is the counter's file or stat name; id must be below CounterIDs.
func (id CounterID) Name() string { return counterDict[id].name }
