package sink

import (
	"cmp"
	"math/bits"
	"slices"
)

// sampleOrder sorts an INSERT's rows by port_samples' sorting key, ORDER BY
// (node, device, port, time_ms), strings compared bytewise as ClickHouse
// does: the server writes a block already in order as it is, and otherwise
// permutes every column of it (tableSpec.order).
//
// It sorts keys, not rows. Comparing rows through their pointers and their
// strings missed the cache on most comparisons: 12.5 % of the sink's CPU
// at 30 000 ports, 2.7 % after (sink-sort-keys). The node and
// device strings are ranked once per INSERT instead (a flush holds a few
// thousand nodes and a handful of device names), and a row's key is
// usually one integer. One pipeline goroutine uses it; its slices and maps
// are reused from INSERT to INSERT.
type sampleOrder struct {
	keys   []orderKey
	packed []uint64
	nodes  ranks
	devs   ranks
}

// orderKey is a row's place: dev is the node's rank and the device's
// rank, in that order of significance, then come the port and the time.
type orderKey struct {
	dev  uint64
	time int64
	port uint16
	row  *SampleRow
}

// ranks numbers distinct strings in the order first seen, then gives each
// its rank in bytewise order.
type ranks struct {
	id    map[string]uint32
	names []string
	rank  []uint32
}

// of returns s's number in first-seen order.
func (r *ranks) of(s string) uint32 {
	if id, ok := r.id[s]; ok {
		return id
	}
	if r.id == nil {
		r.id = make(map[string]uint32)
	}
	id := uint32(len(r.names))
	r.id[s] = id
	r.names = append(r.names, s)
	return id
}

// order fills rank: rank[id] is the rank of the string numbered id.
func (r *ranks) order() {
	byName := make([]uint32, len(r.names))
	for i := range byName {
		byName[i] = uint32(i)
	}
	slices.SortFunc(byName, func(a, b uint32) int { return cmp.Compare(r.names[a], r.names[b]) })
	r.rank = slices.Grow(r.rank[:0], len(r.names))[:len(r.names)]
	for rank, id := range byName {
		r.rank[id] = uint32(rank)
	}
}

// reset forgets the strings (the rows they point into go) but keeps the
// memory.
func (r *ranks) reset() {
	clear(r.id)
	clear(r.names)
	r.names = r.names[:0]
}

// sort puts rows in the table's key order. Rows with one key are one
// sample, alike, so the order among them does not matter.
func (o *sampleOrder) sort(rows []*SampleRow) {
	defer o.nodes.reset()
	defer o.devs.reset()
	o.keys = slices.Grow(o.keys[:0], len(rows))
	var (
		lastNode, lastDev     string
		lastNodeID, lastDevID uint32
		maxPort               uint16
		minTime, maxTime      int64
	)
	for i, r := range rows {
		// A message's rows are one node's, its ports in order: most rows
		// repeat the node of the row before them and many its device.
		if i == 0 || r.Node != lastNode {
			lastNode, lastNodeID = r.Node, o.nodes.of(r.Node)
		}
		if i == 0 || r.Device != lastDev {
			lastDev, lastDevID = r.Device, o.devs.of(r.Device)
		}
		if i == 0 {
			minTime, maxTime = r.TimeMs, r.TimeMs
		}
		maxPort, minTime, maxTime = max(maxPort, r.Port), min(minTime, r.TimeMs), max(maxTime, r.TimeMs)
		o.keys = append(o.keys, orderKey{dev: uint64(lastNodeID)<<32 | uint64(lastDevID), time: r.TimeMs, port: r.Port, row: r})
	}
	o.nodes.order()
	o.devs.order()
	for i := range o.keys {
		k := &o.keys[i]
		k.dev = uint64(o.nodes.rank[k.dev>>32])<<32 | uint64(o.devs.rank[uint32(k.dev)])
	}
	// Usually the whole key and the row's index fit in 64 bits (a flush
	// of a few thousand nodes, a few devices and ports, seconds to minutes
	// of data time), and a slice of integers sorts several times as fast
	// as one of structs through a comparison function.
	wn, wd := bits.Len(uint(len(o.nodes.names)-1)), bits.Len(uint(len(o.devs.names)-1))
	wp, wi := bits.Len16(maxPort), bits.Len(uint(len(rows)-1))
	wt := bits.Len64(uint64(maxTime) - uint64(minTime))
	if len(rows) > 0 && wn+wd+wp+wt+wi <= 64 {
		o.packed = slices.Grow(o.packed[:0], len(rows))
		for i, k := range o.keys {
			key := k.dev >> 32
			key = key<<wd | k.dev&0xffffffff
			key = key<<wp | uint64(k.port)
			key = key<<wt | (uint64(k.time) - uint64(minTime))
			o.packed = append(o.packed, key<<wi|uint64(i))
		}
		slices.Sort(o.packed)
		mask := uint64(1)<<wi - 1
		for i, key := range o.packed {
			rows[i] = o.keys[key&mask].row
		}
	} else {
		slices.SortFunc(o.keys, compareOrderKeys)
		for i, k := range o.keys {
			rows[i] = k.row
		}
	}
	clear(o.keys) // the rows go with the flush
}

// compareOrderKeys compares field by field, returning at the first that
// differs (cmp.Or would compare all three every time).
func compareOrderKeys(a, b orderKey) int {
	switch {
	case a.dev != b.dev:
		return cmp.Compare(a.dev, b.dev)
	case a.port != b.port:
		return cmp.Compare(a.port, b.port)
	}
	return cmp.Compare(a.time, b.time)
}
