package schemas

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/vmihailenco/msgpack/v5"
)

// Version is the wire schema version written into every message. A decoder
// refuses a version it does not know instead of misreading it.
//
// Version 2 is the compact counter encoding (codec.go): counters known to
// counterDict travel as bits and varint deltas, raw values only where a flag
// makes them matter. Version 1 (msgpack maps with counter names) was never
// released.
const Version = 2

// ErrVersion is returned when a message carries a schema version this build
// cannot read.
var ErrVersion = errors.New("unsupported schema version")

// Flag bits describe how a counter's delta was derived.
type Flag uint8

const (
	// FlagFirst marks the first reading after a (re)start: a baseline, no delta.
	FlagFirst Flag = 1 << iota
	// FlagReset marks a counter that fell back toward zero (driver reload,
	// counters cleared): the delta counts from zero.
	FlagReset
	// FlagWrapped marks a 32-bit counter that wrapped past 2^32.
	FlagWrapped
	// FlagSaturated marks a saturating counter pinned at its maximum: errors
	// past that point are invisible until someone clears it.
	FlagSaturated
	// FlagHeld marks a reading that looked like a read glitch (a sudden 0):
	// the previous value is kept as the baseline and the delta is 0 for now.
	FlagHeld
)

// Source says where a counter was read.
type Source uint8

const (
	SourceCounters   Source = 1 // /sys/class/infiniband/<dev>/ports/<p>/counters
	SourceHWCounters Source = 2 // .../hw_counters
	SourceEthtool    Source = 3 // ethtool -S <netdev>
)

func (s Source) String() string {
	switch s {
	case SourceCounters:
		return "counters"
	case SourceHWCounters:
		return "hw_counters"
	case SourceEthtool:
		return "ethtool"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// CounterDelta is one counter of one port-sample.
type CounterDelta struct {
	Name   string
	Source Source
	// Delta is the increase since the previous reading, in the counter's own
	// unit except port_*_data, which is converted to bytes.
	Delta uint64
	// Value is the raw cumulative reading as the hardware reported it. The
	// wire carries it only where a flag makes it matter (a baseline, a reset,
	// a wrap, a saturated or held counter); elsewhere it decodes as 0: the
	// delta is the measurement.
	Value uint64
	Flags Flag
}

// PortSample is one port's reading inside a CounterBatch. Its wire form is
// codec.go's.
type PortSample struct {
	Device    string
	Port      int
	Netdev    string
	LinkLayer string
	State     string
	Rate      string
	// TimeMs is when the port was read (unix milliseconds, data time).
	TimeMs int64
	// IntervalMs is the time since the previous reading the deltas cover;
	// 0 for a baseline.
	IntervalMs int64
	Counters   []CounterDelta
	// Gauges are readings that are not counters (hw_counters/lifespan is a
	// setting in ms); they are passed on as values, never differenced.
	Gauges map[string]uint64

	// present is set by the decoder: bit i says counterDict[i] is in
	// Counters, at the position of its rank among the set bits. It turns a
	// lookup into a popcount instead of a scan of string compares.
	present [dictWords]uint64
	indexed bool
}

const dictWords = (len(counterDict) + 63) / 64

// CounterID names a counter of counterDict; resolve it once with
// LookupCounterID and look it up per sample with CounterByID.
type CounterID int

// LookupCounterID returns the id of a known counter.
func LookupCounterID(src Source, name string) (CounterID, bool) {
	i, ok := dictIndex[dictKey{src, name}]
	return CounterID(i), ok
}

// MustCounterID is LookupCounterID for counters a program names in its
// source: an unknown one is a programming error.
func MustCounterID(src Source, name string) CounterID {
	id, ok := LookupCounterID(src, name)
	if !ok {
		panic("schemas: counter " + src.String() + "/" + name + " is not in the dictionary")
	}
	return id
}

// CounterByID returns the counter with the given id, if it was read.
func (p *PortSample) CounterByID(id CounterID) (CounterDelta, bool) {
	if p.indexed {
		w, bit := int(id)/64, uint(id)%64
		if id < 0 || w >= dictWords || p.present[w]&(1<<bit) == 0 {
			return CounterDelta{}, false
		}
		pos := bits.OnesCount64(p.present[w] & (1<<bit - 1))
		for i := 0; i < w; i++ {
			pos += bits.OnesCount64(p.present[i])
		}
		return p.Counters[pos], true
	}
	e := &counterDict[id]
	return p.scan(e.src, e.name)
}

// IndexedIDs appends to ids the dictionary id of each of the first counters
// of p.Counters and returns them, when p was decoded from the wire: the
// decoder puts the dictionary's counters first, in id order, and the
// counters it does not know after them. For a sample built in memory it
// returns ids and false: look the names up (LookupCounterID). It spares a
// consumer of many samples (the sink) a map lookup per counter.
func (p *PortSample) IndexedIDs(ids []CounterID) ([]CounterID, bool) {
	if !p.indexed {
		return ids, false
	}
	for w, word := range p.present {
		for word != 0 {
			bit := bits.TrailingZeros64(word)
			word &^= 1 << bit
			ids = append(ids, CounterID(w*64+bit))
		}
	}
	return ids, true
}

// Counter returns the named counter of the given source, if it was read.
func (p *PortSample) Counter(src Source, name string) (CounterDelta, bool) {
	if p.indexed {
		if id, ok := dictIndex[dictKey{src, name}]; ok {
			return p.CounterByID(CounterID(id))
		}
	}
	return p.scan(src, name)
}

func (p *PortSample) scan(src Source, name string) (CounterDelta, bool) {
	for _, c := range p.Counters {
		if c.Source == src && c.Name == name {
			return c, true
		}
	}
	return CounterDelta{}, false
}

// CounterBatch is what a collector publishes: one batch per node per
// interval. Its wire form is codec.go's.
type CounterBatch struct {
	Version int
	Node    string
	// BootID is unique per collector process start; with Seq it names the
	// batch, so a retried publish is dropped by JetStream's de-duplication.
	BootID string
	Seq    uint64
	// TimeMs is the scrape time (unix ms, data time).
	TimeMs int64
	Ports  []PortSample
}

// MsgID is the Nats-Msg-Id of the batch.
func (b *CounterBatch) MsgID() string {
	return fmt.Sprintf("%s/%s/%d", b.Node, b.BootID, b.Seq)
}

// PortInventory describes a port for the inventory table.
type PortInventory struct {
	Device    string `msgpack:"d"`
	Port      int    `msgpack:"p"`
	Netdev    string `msgpack:"nd,omitempty"`
	LinkLayer string `msgpack:"ll"`
	State     string `msgpack:"st"`
	Rate      string `msgpack:"r"`
	FWVersion string `msgpack:"fw,omitempty"`
	BoardID   string `msgpack:"bd,omitempty"`
	HCAType   string `msgpack:"hca,omitempty"`
	NodeGUID  string `msgpack:"guid,omitempty"`
	// Config is the port's configuration as last read; nil when the host
	// exposes none of it. Older collectors never send it.
	Config *PortConfig `msgpack:"cfg,omitempty"`
}

// Inventory is a node's port list, published when it changes and at start.
type Inventory struct {
	Version int             `msgpack:"v"`
	Node    string          `msgpack:"n"`
	BootID  string          `msgpack:"b"`
	TimeMs  int64           `msgpack:"t"`
	Ports   []PortInventory `msgpack:"p"`
}

// EncodeBatch encodes a batch for the wire.
func EncodeBatch(b *CounterBatch) ([]byte, error) {
	b.Version = Version
	return appendBatch(make([]byte, 0, 128+len(b.Ports)*192), b)
}

// DecodeBatch decodes and validates a batch from the wire into memory of
// its own.
func DecodeBatch(data []byte) (*CounterBatch, error) {
	var b CounterBatch
	if err := decodeChecked(data, &b, nil); err != nil {
		return nil, err
	}
	return &b, nil
}

// BatchDecoder decodes batches into memory it reuses from one batch to the
// next: the batch Decode returns, with its ports, counters and gauges, is
// valid until the next Decode. A consumer that reads each batch once and
// keeps nothing of it (the processor, the sink's row builder) spares the
// garbage collector almost everything a decode allocates: at 50 000 ports
// a second the decoded counters were most of the processor's allocations,
// and collecting them a quarter of its CPU. Not safe for concurrent use.
type BatchDecoder struct {
	batch CounterBatch
	mem   arena
}

// Decode decodes and validates a batch from the wire, as DecodeBatch does.
func (d *BatchDecoder) Decode(data []byte) (*CounterBatch, error) {
	d.mem.used = 0
	d.batch = CounterBatch{}
	if err := decodeChecked(data, &d.batch, &d.mem); err != nil {
		return nil, err
	}
	return &d.batch, nil
}

func decodeChecked(data []byte, b *CounterBatch, a *arena) error {
	if err := decodeBatch(data, b, a); err != nil {
		return fmt.Errorf("decode counter batch: %w", err)
	}
	if b.Node == "" {
		return fmt.Errorf("decode counter batch: empty node")
	}
	if err := CheckDataTime(b.TimeMs); err != nil {
		return fmt.Errorf("decode counter batch from %s: batch time: %w", b.Node, err)
	}
	for i := range b.Ports {
		p := &b.Ports[i]
		if p.Device == "" || p.Port < 1 || p.Port > MaxPort {
			return fmt.Errorf("decode counter batch from %s: port %d has device %q port %d (want a device and a port 1-%d)", b.Node, i, p.Device, p.Port, MaxPort)
		}
		if err := CheckDataTime(p.TimeMs); err != nil {
			return fmt.Errorf("decode counter batch from %s: port %s/%d time: %w", b.Node, p.Device, p.Port, err)
		}
	}
	return nil
}

// arena hands out the memory of a decoded batch. A nil arena allocates
// each piece on its own (DecodeBatch: the batch may be kept); a
// BatchDecoder's hands out the same memory again batch after batch.
type arena struct {
	ports    []PortSample
	counters []CounterDelta
	used     int // counters handed out in this batch
	gauges   []map[string]uint64
	names    names
}

// portSlice returns n zeroed ports.
func (a *arena) portSlice(n int) []PortSample {
	if a == nil {
		return make([]PortSample, n)
	}
	if cap(a.ports) < n {
		a.ports = make([]PortSample, n)
	}
	s := a.ports[:n]
	clear(s)
	return s
}

// counterSlice returns n zeroed counters with room for capacity.
func (a *arena) counterSlice(n, capacity int) []CounterDelta {
	if a == nil {
		return make([]CounterDelta, n, capacity)
	}
	if len(a.counters)-a.used < capacity {
		// The counters handed out so far keep the old slab; the batches
		// after this one start at the front of the new, larger one.
		a.counters = make([]CounterDelta, max(capacity, 2*len(a.counters), 1024))
		a.used = 0
	}
	s := a.counters[a.used : a.used+n : a.used+capacity]
	a.used += capacity
	clear(s)
	return s
}

// gaugeMap returns an empty map for the gauges of the i-th port.
func (a *arena) gaugeMap(i, hint int) map[string]uint64 {
	if a == nil {
		return make(map[string]uint64, hint)
	}
	for len(a.gauges) <= i {
		a.gauges = append(a.gauges, nil)
	}
	m := a.gauges[i]
	if m == nil {
		m = make(map[string]uint64, hint)
		a.gauges[i] = m
	}
	clear(m)
	return m
}

// EncodeInventory encodes an inventory record.
func EncodeInventory(inv *Inventory) ([]byte, error) {
	if len(inv.Ports) > MaxBatchPorts {
		return nil, fmt.Errorf("encode inventory of %s: %w: %d ports, more than MaxBatchPorts (%d)", inv.Node, ErrTooLarge, len(inv.Ports), MaxBatchPorts)
	}
	inv.Version = Version
	data, err := msgpack.Marshal(inv)
	if err == nil && len(data) > MaxMessageBytes {
		return nil, fmt.Errorf("encode inventory of %s: %w: %d bytes, more than MaxMessageBytes (%d)", inv.Node, ErrTooLarge, len(data), MaxMessageBytes)
	}
	return data, err
}

// DecodeInventory decodes and validates an inventory record.
func DecodeInventory(data []byte) (*Inventory, error) {
	if err := checkWire(data, MaxBatchPorts); err != nil {
		return nil, fmt.Errorf("decode inventory: %w", err)
	}
	var inv Inventory
	if err := msgpack.Unmarshal(data, &inv); err != nil {
		return nil, fmt.Errorf("decode inventory: %w", err)
	}
	// Version 1 was never released: only the version this build writes is
	// known.
	if inv.Version != Version {
		return nil, fmt.Errorf("decode inventory: %w %d (this build reads %d)", ErrVersion, inv.Version, Version)
	}
	if inv.Node == "" {
		return nil, fmt.Errorf("decode inventory: empty node")
	}
	if err := CheckDataTime(inv.TimeMs); err != nil {
		return nil, fmt.Errorf("decode inventory from %s: time: %w", inv.Node, err)
	}
	for i, p := range inv.Ports {
		if p.Device == "" || p.Port < 1 || p.Port > MaxPort {
			return nil, fmt.Errorf("decode inventory from %s: port %d has device %q port %d (want a device and a port 1-%d)", inv.Node, i, p.Device, p.Port, MaxPort)
		}
		if err := p.Config.Validate(); err != nil {
			return nil, fmt.Errorf("decode inventory from %s: port %s/%d: %w", inv.Node, p.Device, p.Port, err)
		}
	}
	return &inv, nil
}
