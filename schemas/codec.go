package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The counter batch is msgpack, written and read by hand: a batch is the
// hot path of every collector, processor and sink, and reflection-based
// decoding cost more than every detector together (decoding by hand took the
// processor's bare consume-and-decode from 55 k to about 250 k port-samples
// per CPU second). The type
// codes are the msgpack library's (msgpcode); only the framing is ours.
//
//	batch = array(6)  [version, node, boot_id, seq, time_ms, ports]
//	port  = array(11) [device, port, netdev, link_layer, state, rate,
//	                   time_ms, interval_ms, counters (bin), extra, gauges]
//	extra = nil | array of array(5) [name, source, delta, value, flags]
//	gauges = nil | map name -> value
//
// A reader skips fields past the ones it knows in a batch, a port or an
// extra counter: the format grows by appending fields.
//
// counters is the compact form of the counters counterDict knows:
//
//	uvarint n, n bytes: bitmap over dictionary indexes, bit i = present
//	ceil(P/8) bytes:    bitmap over the P present counters, bit = delta != 0
//	uvarint per non-zero delta, in dictionary order
//	uvarint F, then F x (uvarint position among the present, flags byte,
//	                     uvarint raw value)
//
// A counter's raw value travels only with its flags (baseline, reset, wrap,
// saturated, held): that is where a reader needs it, and it keeps a sample
// a fraction of its JSON.

var errShort = errors.New("truncated")

// Smallest wire sizes, in bytes, of the things a count announces. A decoder
// checks count x size against the bytes left before it allocates, so a
// message can only make it allocate in proportion to its own size.
const (
	// minPortBytes: array header, 6 one-byte strings or integers, two
	// one-byte times, a 2-byte bin header with its 2-byte minimal counters
	// (no bitmap, no flags), nil extra and nil gauges.
	minPortBytes = 15
	// minExtraBytes: array header, a one-byte name and four one-byte
	// integers.
	minExtraBytes = 6
	// minGaugeBytes: a one-byte name and a one-byte value.
	minGaugeBytes = 2
)

// maxSkipDepth bounds the nesting of values a reader skips: the formats
// nest three deep, and a hostile message of nested arrays must not recurse
// without end.
const maxSkipDepth = 16

// ---- writing ----

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n <= int(msgpcode.FixedArrayMask):
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Array16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, msgpcode.Array32), uint32(n))
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n <= int(msgpcode.FixedMapMask):
		return append(b, msgpcode.FixedMapLow|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Map16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, msgpcode.Map32), uint32(n))
}

func appendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= int(msgpcode.FixedStrMask):
		b = append(b, msgpcode.FixedStrLow|byte(n))
	case n <= math.MaxUint8:
		b = append(b, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, msgpcode.Str16), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, msgpcode.Str32), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, msgpcode.Bin8, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, msgpcode.Bin16), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, msgpcode.Bin32), uint32(n))
	}
	return append(b, p...)
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= uint64(msgpcode.PosFixedNumHigh):
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, msgpcode.Uint8, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Uint16), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Uint32), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, msgpcode.Uint64), v)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	if v >= int64(int8(msgpcode.NegFixedNumLow)) { // negative fixint, -32..-1
		return append(b, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, msgpcode.Int64), uint64(v))
}

func appendBatch(b []byte, bt *CounterBatch) ([]byte, error) {
	if len(bt.Ports) > MaxBatchPorts {
		return nil, fmt.Errorf("%w: %d ports, more than MaxBatchPorts (%d)", ErrTooLarge, len(bt.Ports), MaxBatchPorts)
	}
	b = appendArrayLen(b, 6)
	b = appendUint(b, uint64(bt.Version))
	b = appendString(b, bt.Node)
	b = appendString(b, bt.BootID)
	b = appendUint(b, bt.Seq)
	b = appendInt(b, bt.TimeMs)
	b = appendArrayLen(b, len(bt.Ports))
	var scratch []byte
	for i := range bt.Ports {
		var err error
		if b, scratch, err = appendPort(b, scratch, &bt.Ports[i]); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes with %d ports, more than MaxMessageBytes (%d)", ErrTooLarge, len(b), len(bt.Ports), MaxMessageBytes)
	}
	return b, nil
}

func appendPort(b, scratch []byte, p *PortSample) ([]byte, []byte, error) {
	if p.Port < 0 || p.Port > MaxPort {
		// A decoder refuses it: encoding it would publish a batch refused
		// forever.
		return nil, nil, fmt.Errorf("port %s/%d: out of range 0-%d", p.Device, p.Port, MaxPort)
	}
	b = appendArrayLen(b, 11)
	b = appendString(b, p.Device)
	b = appendUint(b, uint64(p.Port))
	b = appendString(b, p.Netdev)
	b = appendString(b, p.LinkLayer)
	b = appendString(b, p.State)
	b = appendString(b, p.Rate)
	b = appendInt(b, p.TimeMs)
	b = appendInt(b, p.IntervalMs)
	scratch, extra, err := packCounters(scratch[:0], p)
	if err != nil {
		return nil, nil, err
	}
	b = appendBin(b, scratch)
	b = appendExtraCounters(b, p, extra)
	b = appendGauges(b, p.Gauges)
	return b, scratch, nil
}

// packCounters appends the compact form of p's dictionary counters to
// scratch (the layout is in the comment at the top of this file) and returns
// the indexes into p.Counters of the counters the dictionary does not know,
// which travel by name.
func packCounters(scratch []byte, p *PortSample) ([]byte, []int, error) {
	// Fixed-size arrays rather than slices: they stay on the stack, and the
	// encoder allocates nothing per port but what it returns.
	var present [(len(counterDict) + 63) / 64]uint64
	var slot [len(counterDict)]int32 // dictionary index -> index into p.Counters
	var posBuf [len(counterDict)]int32
	var extra []int
	for i, c := range p.Counters {
		idx, ok := dictIndex[dictKey{c.Source, c.Name}]
		if !ok {
			extra = append(extra, i)
			continue
		}
		if present[idx/64]&(1<<(idx%64)) != 0 {
			return nil, nil, fmt.Errorf("port %s/%d: counter %s/%s twice", p.Device, p.Port, c.Source, c.Name)
		}
		present[idx/64] |= 1 << (idx % 64)
		slot[idx] = int32(i)
	}
	maxIdx := -1
	for w := len(present) - 1; w >= 0; w-- {
		if present[w] != 0 {
			maxIdx = w*64 + 63 - bits.LeadingZeros64(present[w])
			break
		}
	}
	pos := posBuf[:0] // indexes into p.Counters, in dictionary order
	for idx := 0; idx <= maxIdx; idx++ {
		if present[idx/64]&(1<<(idx%64)) != 0 {
			pos = append(pos, slot[idx])
		}
	}
	nBitmap := (maxIdx + 8) / 8
	scratch = binary.AppendUvarint(scratch, uint64(nBitmap))
	for i := 0; i < nBitmap; i++ {
		scratch = append(scratch, byte(present[i/8]>>(8*(i%8))))
	}
	return appendCounterValues(scratch, p.Counters, pos), extra, nil
}

// appendCounterValues appends, for the counters at pos (in dictionary
// order), the non-zero bitmap, the non-zero deltas and the flagged counters
// with their raw values.
func appendCounterValues(scratch []byte, counters []CounterDelta, pos []int32) []byte {
	nz := len(scratch)
	scratch = append(scratch, make([]byte, (len(pos)+7)/8)...)
	flagged := 0
	for j, ci := range pos {
		c := &counters[ci]
		if c.Delta != 0 {
			scratch[nz+j/8] |= 1 << (j % 8)
		}
		if c.Flags != 0 {
			flagged++
		}
	}
	for _, ci := range pos {
		if d := counters[ci].Delta; d != 0 {
			scratch = binary.AppendUvarint(scratch, d)
		}
	}
	scratch = binary.AppendUvarint(scratch, uint64(flagged))
	for j, ci := range pos {
		c := &counters[ci]
		if c.Flags != 0 {
			scratch = binary.AppendUvarint(scratch, uint64(j))
			scratch = append(scratch, byte(c.Flags))
			scratch = binary.AppendUvarint(scratch, c.Value)
		}
	}
	return scratch
}

// appendExtraCounters appends the counters at p.Counters[extra], which the
// dictionary does not know, by name; nil when there are none.
func appendExtraCounters(b []byte, p *PortSample, extra []int) []byte {
	if len(extra) == 0 {
		return append(b, msgpcode.Nil)
	}
	b = appendArrayLen(b, len(extra))
	for _, i := range extra {
		c := &p.Counters[i]
		b = appendArrayLen(b, 5)
		b = appendString(b, c.Name)
		b = appendUint(b, uint64(c.Source))
		b = appendUint(b, c.Delta)
		b = appendUint(b, c.Value)
		b = appendUint(b, uint64(c.Flags))
	}
	return b
}

// appendGauges appends a port's gauges as a map; nil when there are none.
func appendGauges(b []byte, gauges map[string]uint64) []byte {
	if len(gauges) == 0 {
		return append(b, msgpcode.Nil)
	}
	b = appendMapLen(b, len(gauges))
	for k, v := range gauges {
		b = appendString(b, k)
		b = appendUint(b, v)
	}
	return b
}

// ---- reading ----

type reader struct {
	b   []byte
	off int
	// maxElems, when set, bounds the elements of every array and map skip
	// meets (checkWire).
	maxElems int
	// names, when set, keeps the strings read before for sharedString to
	// hand out again (a BatchDecoder's).
	names *names
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, errShort
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

func (r *reader) be(n int) (uint64, error) {
	p, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// isNil consumes a msgpack nil if one is next.
func (r *reader) isNil() bool {
	if r.off < len(r.b) && r.b[r.off] == msgpcode.Nil {
		r.off++
		return true
	}
	return false
}

// container holds the codes and words that tell an array header from a map
// header.
type container struct {
	fixLow, fixHigh, fixMask, code16, code32 byte
	values                                   int    // per element: a map's hold a key and a value
	name, article, elems                     string // for errors
}

var (
	arrayHeader = container{msgpcode.FixedArrayLow, msgpcode.FixedArrayHigh, msgpcode.FixedArrayMask,
		msgpcode.Array16, msgpcode.Array32, 1, "array", "an", "elements"}
	mapHeader = container{msgpcode.FixedMapLow, msgpcode.FixedMapHigh, msgpcode.FixedMapMask,
		msgpcode.Map16, msgpcode.Map32, 2, "map", "a", "entries"}
)

// arrayLen reads an array header. The count is checked against the bytes
// left at minElem bytes per element, before any caller allocates for it.
func (r *reader) arrayLen(minElem int) (int, error) { return r.header(&arrayHeader, minElem) }

// mapLen reads a map header, its count checked as arrayLen's, at minEntry
// bytes per key and value.
func (r *reader) mapLen(minEntry int) (int, error) { return r.header(&mapHeader, minEntry) }

func (r *reader) header(k *container, minElem int) (int, error) {
	at := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c >= k.fixLow && c <= k.fixHigh:
		n = uint64(c & k.fixMask)
	case c == k.code16:
		n, err = r.be(2)
	case c == k.code32:
		n, err = r.be(4)
	default:
		return 0, fmt.Errorf("want %s %s, got 0x%02x at byte %d", k.article, k.name, c, at)
	}
	if err != nil {
		return 0, err
	}
	if n*uint64(minElem) > uint64(r.left()) {
		return 0, fmt.Errorf("%s at byte %d claims %d %s of %d bytes or more; %d bytes are left", k.name, at, n, k.elems, minElem, r.left())
	}
	return int(n), nil
}

func (r *reader) rawString() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case msgpcode.IsFixedString(c):
		n = uint64(c & msgpcode.FixedStrMask)
	case c == msgpcode.Str8:
		n, err = r.be(1)
	case c == msgpcode.Str16:
		n, err = r.be(2)
	case c == msgpcode.Str32:
		n, err = r.be(4)
	default:
		return nil, fmt.Errorf("want a string, got 0x%02x at byte %d", c, r.off-1)
	}
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

func (r *reader) string() (string, error) {
	p, err := r.rawString()
	return string(p), err
}

// sharedString is string returning last, or a wellKnown value, when the
// bytes equal it (the comparisons and the map lookup do not allocate).
func (r *reader) sharedString(last string) (string, error) {
	p, err := r.rawString()
	if err != nil {
		return "", err
	}
	if string(p) == last {
		return last, nil
	}
	if s, ok := wellKnown[string(p)]; ok {
		return s, nil
	}
	if r.names != nil {
		return r.names.get(p), nil
	}
	return string(p), nil
}

// names is a bounded set of strings a decoder read before: node names,
// netdevs and rates repeat batch after batch, and each one allocated
// anew was most of what a reused decoder still allocated. A hostile stream
// of ever new names only empties it now and then.
type names struct {
	m map[string]string
}

// maxNames bounds a names set: a fleet's node names (one per host) and its
// netdevs and rates fit, with room.
const maxNames = 1 << 15

func (n *names) get(p []byte) string {
	if s, ok := n.m[string(p)]; ok {
		return s
	}
	if n.m == nil || len(n.m) >= maxNames {
		n.m = make(map[string]string, 256)
	}
	s := string(p)
	n.m[s] = s
	return s
}

// wellKnown are the strings most ports and gauges carry.
var wellKnown = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"Ethernet", "InfiniBand", "ACTIVE", "DOWN", "INIT", "ARMED", "POLLING", "lifespan"} {
		m[s] = s
	}
	for i := range 16 {
		for _, d := range []string{"mlx5_", "mlx4_"} {
			s := d + strconv.Itoa(i)
			m[s] = s
		}
	}
	return m
}()

func (r *reader) bin() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch c {
	case msgpcode.Bin8:
		n, err = r.be(1)
	case msgpcode.Bin16:
		n, err = r.be(2)
	case msgpcode.Bin32:
		n, err = r.be(4)
	default:
		return nil, fmt.Errorf("want bytes, got 0x%02x at byte %d", c, r.off-1)
	}
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

func (r *reader) uint() (uint64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), nil
	case c == msgpcode.Uint8:
		return r.be(1)
	case c == msgpcode.Uint16:
		return r.be(2)
	case c == msgpcode.Uint32:
		return r.be(4)
	case c == msgpcode.Uint64:
		return r.be(8)
	}
	return 0, fmt.Errorf("want an unsigned integer, got 0x%02x at byte %d", c, r.off-1)
}

func (r *reader) int() (int64, error) {
	if r.off < len(r.b) {
		switch c := r.b[r.off]; {
		case c >= msgpcode.NegFixedNumLow:
			r.off++
			return int64(int8(c)), nil
		case c == msgpcode.Int64:
			r.off++
			v, err := r.be(8)
			return int64(v), err
		}
	}
	v, err := r.uint()
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("integer %d overflows int64", v)
	}
	return int64(v), nil
}

// skipN skips n msgpack values of any type.
func (r *reader) skipN(n int) error {
	for ; n > 0; n-- {
		if err := r.skip(0); err != nil {
			return err
		}
	}
	return nil
}

// skip skips one msgpack value of any type, checking every length against
// the bytes left and nesting to maxSkipDepth.
func (r *reader) skip(depth int) error {
	if depth > maxSkipDepth {
		return fmt.Errorf("values nested deeper than %d at byte %d", maxSkipDepth, r.off)
	}
	at := r.off
	c, err := r.byte()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedArray(c), c == msgpcode.Array16, c == msgpcode.Array32:
		r.off = at
		return r.skipContainer(&arrayHeader, depth)
	case msgpcode.IsFixedMap(c), c == msgpcode.Map16, c == msgpcode.Map32:
		r.off = at
		return r.skipContainer(&mapHeader, depth)
	}
	n, err := r.payloadLen(c, at)
	if err != nil {
		return err
	}
	if n > uint64(r.left()) {
		return errShort
	}
	r.off += int(n)
	return nil
}

// skipContainer skips an array or a map, its header next, and its values
// one level deeper than depth.
func (r *reader) skipContainer(k *container, depth int) error {
	at := r.off
	m, err := r.header(k, k.values)
	if err != nil {
		return err
	}
	if r.maxElems > 0 && m > r.maxElems {
		return fmt.Errorf("%s at byte %d has %d %s, more than %d", k.name, at, m, k.elems, r.maxElems)
	}
	for m *= k.values; m > 0; m-- {
		if err := r.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// payloadLen reads what is left of the header of a scalar, string, binary or
// extension value whose type byte c (at byte at) was just read, and returns
// the bytes of payload that follow it.
func (r *reader) payloadLen(c byte, at int) (uint64, error) {
	switch {
	case msgpcode.IsFixedNum(c), c == msgpcode.Nil, c == msgpcode.False, c == msgpcode.True:
		return 0, nil
	case msgpcode.IsFixedString(c):
		return uint64(c & msgpcode.FixedStrMask), nil
	case c == msgpcode.Uint8, c == msgpcode.Int8:
		return 1, nil
	case c == msgpcode.Uint16, c == msgpcode.Int16:
		return 2, nil
	case c == msgpcode.Uint32, c == msgpcode.Int32, c == msgpcode.Float:
		return 4, nil
	case c == msgpcode.Uint64, c == msgpcode.Int64, c == msgpcode.Double:
		return 8, nil
	case c == msgpcode.Str8, c == msgpcode.Bin8:
		return r.be(1)
	case c == msgpcode.Str16, c == msgpcode.Bin16:
		return r.be(2)
	case c == msgpcode.Str32, c == msgpcode.Bin32:
		return r.be(4)
	case c == msgpcode.FixExt1:
		return 1 + 1, nil // type byte and data
	case c == msgpcode.FixExt2:
		return 1 + 2, nil
	case c == msgpcode.FixExt4:
		return 1 + 4, nil
	case c == msgpcode.FixExt8:
		return 1 + 8, nil
	case c == msgpcode.FixExt16:
		return 1 + 16, nil
	case c == msgpcode.Ext8:
		n, err := r.be(1)
		return n + 1, err // the type byte follows the length
	case c == msgpcode.Ext16:
		n, err := r.be(2)
		return n + 1, err
	case c == msgpcode.Ext32:
		n, err := r.be(4)
		return n + 1, err
	}
	return 0, fmt.Errorf("byte 0x%02x at byte %d is not a msgpack type", c, at)
}

// checkWire walks one msgpack message before a reflection-based decoder
// (msgpack.Unmarshal) reads it: that decoder sizes a slice by the count a
// message claims, so 20 bytes claiming 4 billion ports would take the
// process down. checkWire refuses a message past MaxMessageBytes, a count
// larger than the bytes left can hold or than maxElems, nesting past
// maxSkipDepth, and bytes after the message.
func checkWire(data []byte, maxElems int) error {
	if len(data) > MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes, more than MaxMessageBytes (%d)", ErrTooLarge, len(data), MaxMessageBytes)
	}
	r := &reader{b: data, maxElems: maxElems}
	if err := r.skip(0); err != nil {
		return err
	}
	if r.left() != 0 {
		return fmt.Errorf("%d bytes after the message", r.left())
	}
	return nil
}

func decodeBatch(data []byte, bt *CounterBatch, a *arena) error {
	if len(data) > MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes, more than MaxMessageBytes (%d)", ErrTooLarge, len(data), MaxMessageBytes)
	}
	r := &reader{b: data}
	if a != nil {
		r.names = &a.names
	}
	if len(data) > 0 && (msgpcode.IsFixedMap(data[0]) || data[0] == msgpcode.Map16 || data[0] == msgpcode.Map32) {
		return fmt.Errorf("%w 1 (msgpack map form; this build reads %d)", ErrVersion, Version)
	}
	n, err := r.arrayLen(1)
	if err != nil {
		return err
	}
	if n < 6 {
		return fmt.Errorf("batch has %d fields, want 6", n)
	}
	v, err := r.uint()
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if v != Version {
		return fmt.Errorf("%w %d (this build reads %d)", ErrVersion, v, Version)
	}
	bt.Version = int(v)
	if bt.Node, err = r.sharedString(""); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if bt.BootID, err = r.sharedString(""); err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	if bt.Seq, err = r.uint(); err != nil {
		return fmt.Errorf("seq: %w", err)
	}
	if bt.TimeMs, err = r.int(); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	np, err := r.arrayLen(0)
	if err != nil {
		return fmt.Errorf("ports: %w", err)
	}
	if np > MaxBatchPorts {
		return fmt.Errorf("ports: %w: %d ports, more than MaxBatchPorts (%d)", ErrTooLarge, np, MaxBatchPorts)
	}
	if np*minPortBytes > r.left() {
		return fmt.Errorf("ports: %d ports of %d bytes or more; %d bytes are left", np, minPortBytes, r.left())
	}
	bt.Ports = a.portSlice(np)
	var prev *PortSample
	for i := range bt.Ports {
		if err := decodePort(r, &bt.Ports[i], prev, a, i); err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
		prev = &bt.Ports[i]
	}
	if err := r.skipN(n - 6); err != nil {
		return fmt.Errorf("field 7 on: %w", err)
	}
	if r.left() != 0 {
		return fmt.Errorf("%d bytes after the batch", r.left())
	}
	return nil
}

func decodePort(r *reader, p *PortSample, prev *PortSample, a *arena, i int) error {
	n, err := r.arrayLen(1)
	if err != nil {
		return err
	}
	if n < 11 {
		return fmt.Errorf("%d fields, want 11", n)
	}
	if err := decodePortHeader(r, p, prev); err != nil {
		return err
	}
	packed, err := r.bin()
	if err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	nExtra := 0
	if !r.isNil() {
		if nExtra, err = r.arrayLen(minExtraBytes); err != nil {
			return fmt.Errorf("extra counters: %w", err)
		}
	}
	if err := decodeCounters(packed, p, nExtra, a); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	if err := decodeExtraCounters(r, p, nExtra); err != nil {
		return err
	}
	if err := decodeGauges(r, p, a, i); err != nil {
		return err
	}
	// Fields a newer build appended: skipped, the format grows at the end.
	if err := r.skipN(n - 11); err != nil {
		return fmt.Errorf("field 12 on: %w", err)
	}
	return nil
}

// decodePortHeader reads a port's fields 1 to 8: device, port number,
// netdev, link layer, state, rate, time and interval. A string equal to
// the previous port's (prev, nil for the first) or to a well-known value
// shares it instead of allocating: the ports of a host mostly repeat their
// link layer, state and rate, and the processor's time went to the
// garbage collector as much as to decoding.
func decodePortHeader(r *reader, p *PortSample, prev *PortSample) error {
	var err error
	var last PortSample
	if prev != nil {
		last = *prev
	}
	if p.Device, err = r.sharedString(last.Device); err != nil {
		return fmt.Errorf("device: %w", err)
	}
	port, err := r.uint()
	if err != nil {
		return fmt.Errorf("port number: %w", err)
	}
	if port < 1 || port > MaxPort {
		return fmt.Errorf("port number %d is out of range 1-%d", port, MaxPort)
	}
	p.Port = int(port)
	for _, f := range []struct {
		name string
		v    *string
		last string
	}{{"netdev", &p.Netdev, last.Netdev}, {"link layer", &p.LinkLayer, last.LinkLayer}, {"state", &p.State, last.State}, {"rate", &p.Rate, last.Rate}} {
		if *f.v, err = r.sharedString(f.last); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if p.TimeMs, err = r.int(); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	if p.IntervalMs, err = r.int(); err != nil {
		return fmt.Errorf("interval: %w", err)
	}
	return nil
}

// decodeExtraCounters reads the nExtra counters that travel by name (their
// array header already read) and appends them to p.Counters.
func decodeExtraCounters(r *reader, p *PortSample, nExtra int) error {
	var seen map[dictKey]bool
	if nExtra > 0 {
		seen = make(map[dictKey]bool, min(nExtra, maxExtraHint))
	}
	for i := 0; i < nExtra; i++ {
		m, err := r.arrayLen(1)
		if err != nil {
			return fmt.Errorf("extra counter %d: %w", i, err)
		}
		if m < 5 {
			return fmt.Errorf("extra counter %d: %d fields, want 5", i, m)
		}
		var c CounterDelta
		if c.Name, err = r.string(); err != nil {
			return fmt.Errorf("extra counter %d name: %w", i, err)
		}
		vals := [4]uint64{}
		for j, field := range [4]string{"source", "delta", "value", "flags"} {
			if vals[j], err = r.uint(); err != nil {
				return fmt.Errorf("extra counter %q %s: %w", c.Name, field, err)
			}
		}
		if vals[0] > math.MaxUint8 || vals[3] > math.MaxUint8 {
			return fmt.Errorf("extra counter %q: source %d flags %d out of range", c.Name, vals[0], vals[3])
		}
		c.Source, c.Delta, c.Value, c.Flags = Source(vals[0]), vals[1], vals[2], Flag(vals[3])
		// A writer sends a dictionary counter by index, never by name: one
		// that came by name too would be a second reading of the same
		// counter in one sample.
		k := dictKey{c.Source, c.Name}
		if _, known := dictIndex[k]; known {
			return fmt.Errorf("extra counter %s/%s is a dictionary counter", c.Source, c.Name)
		}
		if seen[k] {
			return fmt.Errorf("extra counter %s/%s twice", c.Source, c.Name)
		}
		seen[k] = true
		if err := r.skipN(m - 5); err != nil {
			return fmt.Errorf("extra counter %s/%s: %w", c.Source, c.Name, err)
		}
		p.Counters = append(p.Counters, c)
	}
	return nil
}

// decodeGauges reads a port's gauges: nil or a map of name to value.
func decodeGauges(r *reader, p *PortSample, a *arena, i int) error {
	if r.isNil() {
		return nil
	}
	ng, err := r.mapLen(minGaugeBytes)
	if err != nil {
		return fmt.Errorf("gauges: %w", err)
	}
	if ng > 0 { // an empty map reads as none, as the writer writes it
		p.Gauges = a.gaugeMap(i, min(ng, maxGaugeHint))
	}
	for i := 0; i < ng; i++ {
		k, err := r.sharedString("")
		if err != nil {
			return fmt.Errorf("gauge %d name: %w", i, err)
		}
		if p.Gauges[k], err = r.uint(); err != nil {
			return fmt.Errorf("gauge %q: %w", k, err)
		}
	}
	return nil
}

// maxExtraHint bounds the room a port's declared count of counters by name
// preallocates: beyond it, only counters actually on the wire take memory.
const maxExtraHint = 64

// maxGaugeHint bounds the map a port's declared gauge count preallocates: a
// real port has one or two gauges, and a hostile count must not size a map.
const maxGaugeHint = 16

// decodeCounters reads a port's dictionary counters: the bitmap of those
// present, the bitmap of those with a non-zero delta and the deltas, then
// the flagged ones' flags and raw values.
func decodeCounters(b []byte, p *PortSample, nExtra int, a *arena) error {
	r := &reader{b: b}
	bitmap, err := readCounterBitmap(r)
	if err != nil {
		return err
	}
	present := nameCounters(p, bitmap, nExtra, a)
	if err := readDeltas(r, p, present); err != nil {
		return err
	}
	return readFlags(r, p, present)
}

// readCounterBitmap reads the bitmap of the dictionary counters a port has,
// refusing bits this build's dictionary does not have.
func readCounterBitmap(r *reader) ([]byte, error) {
	nBitmap, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("counter bitmap length: %w", err)
	}
	if nBitmap > uint64(len(counterDict)+7)/8 {
		return nil, fmt.Errorf("counter bitmap of %d bytes: written by a newer build with counters this one does not know", nBitmap)
	}
	bitmap, err := r.take(int(nBitmap))
	if err != nil {
		return nil, fmt.Errorf("counter bitmap: %w", err)
	}
	// The last byte may name indexes past the dictionary's end (158 entries
	// fill 19 bytes and 6 bits): such a bit is a counter this build does not
	// know, and indexing counterDict with it would panic.
	if n := len(bitmap); n*8 > len(counterDict) {
		if past := bitmap[n-1] >> (len(counterDict) - (n-1)*8); past != 0 {
			return nil, fmt.Errorf("counter bitmap: bit %d is past the %d counters of the dictionary (written by a newer build?)",
				len(counterDict)+bits.TrailingZeros8(past), len(counterDict))
		}
	}
	return bitmap, nil
}

// nameCounters gives p one counter per bit of bitmap, in dictionary order,
// named from the dictionary (with room for nExtra counters by name), and
// returns how many.
func nameCounters(p *PortSample, bitmap []byte, nExtra int, a *arena) (present int) {
	for _, c := range bitmap {
		present += bits.OnesCount8(c)
	}
	p.Counters = a.counterSlice(present, present+min(nExtra, maxExtraHint))
	for i, c := range bitmap {
		p.present[i/8] |= uint64(c) << (8 * (i % 8))
	}
	p.indexed = true
	j := 0
	for i, c := range bitmap {
		for c != 0 {
			bit := bits.TrailingZeros8(c)
			c &^= 1 << bit
			e := &counterDict[i*8+bit]
			p.Counters[j].Name, p.Counters[j].Source = e.name, e.src
			j++
		}
	}
	return present
}

// readDeltas reads which of the present counters moved, and their deltas.
func readDeltas(r *reader, p *PortSample, present int) error {
	nonzero, err := r.take((present + 7) / 8)
	if err != nil {
		return fmt.Errorf("non-zero bitmap of %d counters: %w", present, err)
	}
	for j := range p.Counters {
		if nonzero[j/8]&(1<<(j%8)) != 0 {
			c := &p.Counters[j]
			if c.Delta, err = r.uvarint(); err != nil {
				return fmt.Errorf("delta of %s/%s: %w", c.Source, c.Name, err)
			}
		}
	}
	return nil
}

// readFlags reads the flagged counters: each one's position among the
// present counters, its flags and its raw value.
func readFlags(r *reader, p *PortSample, present int) error {
	flagged, err := r.uvarint()
	if err != nil {
		return fmt.Errorf("flag count: %w", err)
	}
	if flagged > uint64(present) {
		return fmt.Errorf("%d flagged of %d counters", flagged, present)
	}
	for k := uint64(0); k < flagged; k++ {
		at, err := r.uvarint()
		if err != nil {
			return fmt.Errorf("flag %d position: %w", k, err)
		}
		if at >= uint64(present) {
			return fmt.Errorf("flag %d for counter %d of %d", k, at, present)
		}
		c := &p.Counters[at]
		f, err := r.byte()
		if err != nil {
			return fmt.Errorf("flags of %s/%s: %w", c.Source, c.Name, err)
		}
		if f == 0 {
			// The writer lists only counters with a flag; an entry
			// without one would carry a raw value nobody reads.
			return fmt.Errorf("flag %d for %s/%s sets no flag", k, c.Source, c.Name)
		}
		c.Flags = Flag(f)
		if c.Value, err = r.uvarint(); err != nil {
			return fmt.Errorf("raw value of %s/%s: %w", c.Source, c.Name, err)
		}
	}
	return nil
}

func (r *reader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		return 0, errShort
	}
	r.off += n
	return v, nil
}
