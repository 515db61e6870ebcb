package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// The counter batch is msgpack, written and read by hand: a batch is the
// hot path of every collector, processor and sink, and reflection-based
// decoding cost more than every detector together (BENCHMARKS.md).
//
//	batch = array(6)  [version, node, boot_id, seq, time_ms, ports]
//	port  = array(11) [device, port, netdev, link_layer, state, rate,
//	                   time_ms, interval_ms, counters (bin), extra, gauges]
//	extra = nil | array of array(5) [name, source, delta, value, flags]
//	gauges = nil | map name -> value
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

// ---- writing ----

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	}
	return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	}
	return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, p...)
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	if v >= -32 {
		return append(b, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendBatch(b []byte, bt *CounterBatch) ([]byte, error) {
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
	return b, nil
}

func appendPort(b, scratch []byte, p *PortSample) ([]byte, []byte, error) {
	if p.Port < 0 {
		return nil, nil, fmt.Errorf("port %s/%d: negative port", p.Device, p.Port)
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

	// Known counters in dictionary order; the rest by name.
	var present [(len(counterDict) + 63) / 64]uint64
	var slot [len(counterDict)]int32 // dictionary index -> index into p.Counters
	var posBuf [len(counterDict)]int32
	pos := posBuf[:0] // indexes into p.Counters, in dictionary order
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
	for idx := 0; idx <= maxIdx; idx++ {
		if present[idx/64]&(1<<(idx%64)) != 0 {
			pos = append(pos, slot[idx])
		}
	}
	scratch = scratch[:0]
	nBitmap := (maxIdx + 8) / 8
	scratch = binary.AppendUvarint(scratch, uint64(nBitmap))
	for i := 0; i < nBitmap; i++ {
		scratch = append(scratch, byte(present[i/8]>>(8*(i%8))))
	}
	nz := len(scratch)
	scratch = append(scratch, make([]byte, (len(pos)+7)/8)...)
	flagged := 0
	for j, ci := range pos {
		c := &p.Counters[ci]
		if c.Delta != 0 {
			scratch[nz+j/8] |= 1 << (j % 8)
		}
		if c.Flags != 0 {
			flagged++
		}
	}
	for _, ci := range pos {
		if d := p.Counters[ci].Delta; d != 0 {
			scratch = binary.AppendUvarint(scratch, d)
		}
	}
	scratch = binary.AppendUvarint(scratch, uint64(flagged))
	for j, ci := range pos {
		c := &p.Counters[ci]
		if c.Flags != 0 {
			scratch = binary.AppendUvarint(scratch, uint64(j))
			scratch = append(scratch, byte(c.Flags))
			scratch = binary.AppendUvarint(scratch, c.Value)
		}
	}
	b = appendBin(b, scratch)

	if len(extra) == 0 {
		b = append(b, 0xc0)
	} else {
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
	}
	if len(p.Gauges) == 0 {
		b = append(b, 0xc0)
	} else {
		b = appendMapLen(b, len(p.Gauges))
		for k, v := range p.Gauges {
			b = appendString(b, k)
			b = appendUint(b, v)
		}
	}
	return b, scratch, nil
}

// ---- reading ----

type reader struct {
	b   []byte
	off int
}

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
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

func (r *reader) arrayLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c&0xf0 == 0x90:
		return int(c & 0x0f), nil
	case c == 0xdc:
		n, err = r.be(2)
	case c == 0xdd:
		n, err = r.be(4)
	default:
		return 0, fmt.Errorf("want an array, got 0x%02x at byte %d", c, r.off-1)
	}
	if err == nil && n > uint64(len(r.b)-r.off) { // every element takes a byte at least
		err = errShort
	}
	return int(n), err
}

func (r *reader) mapLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), nil
	case c == 0xde:
		n, err = r.be(2)
	case c == 0xdf:
		n, err = r.be(4)
	default:
		return 0, fmt.Errorf("want a map, got 0x%02x at byte %d", c, r.off-1)
	}
	if err == nil && 2*n > uint64(len(r.b)-r.off) {
		err = errShort
	}
	return int(n), err
}

func (r *reader) rawString() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, err = r.be(1)
	case c == 0xda:
		n, err = r.be(2)
	case c == 0xdb:
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

func (r *reader) bin() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch c {
	case 0xc4:
		n, err = r.be(1)
	case 0xc5:
		n, err = r.be(2)
	case 0xc6:
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
	case c < 0x80:
		return uint64(c), nil
	case c == 0xcc:
		return r.be(1)
	case c == 0xcd:
		return r.be(2)
	case c == 0xce:
		return r.be(4)
	case c == 0xcf:
		return r.be(8)
	}
	return 0, fmt.Errorf("want an unsigned integer, got 0x%02x at byte %d", c, r.off-1)
}

func (r *reader) int() (int64, error) {
	if r.off < len(r.b) {
		switch c := r.b[r.off]; {
		case c >= 0xe0:
			r.off++
			return int64(int8(c)), nil
		case c == 0xd3:
			r.off++
			v, err := r.be(8)
			return int64(v), err
		}
	}
	v, err := r.uint()
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("integer %d overflows int64", v)
	}
	return int64(v), err
}

func decodeBatch(data []byte, bt *CounterBatch) error {
	r := &reader{b: data}
	if len(data) > 0 && (data[0]&0xf0 == 0x80 || data[0] == 0xde || data[0] == 0xdf) {
		return fmt.Errorf("%w 1 (msgpack map form; this build reads %d)", ErrVersion, Version)
	}
	n, err := r.arrayLen()
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
	if bt.Node, err = r.string(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if bt.BootID, err = r.string(); err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	if bt.Seq, err = r.uint(); err != nil {
		return fmt.Errorf("seq: %w", err)
	}
	if bt.TimeMs, err = r.int(); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	np, err := r.arrayLen()
	if err != nil {
		return fmt.Errorf("ports: %w", err)
	}
	bt.Ports = make([]PortSample, np)
	for i := range bt.Ports {
		if err := decodePort(r, &bt.Ports[i]); err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
	}
	return nil
}

func decodePort(r *reader, p *PortSample) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n < 11 {
		return fmt.Errorf("%d fields, want 11", n)
	}
	if p.Device, err = r.string(); err != nil {
		return fmt.Errorf("device: %w", err)
	}
	port, err := r.uint()
	if err != nil || port > math.MaxInt32 {
		return fmt.Errorf("port number: %v", err)
	}
	p.Port = int(port)
	for _, f := range []*string{&p.Netdev, &p.LinkLayer, &p.State, &p.Rate} {
		if *f, err = r.string(); err != nil {
			return err
		}
	}
	if p.TimeMs, err = r.int(); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	if p.IntervalMs, err = r.int(); err != nil {
		return fmt.Errorf("interval: %w", err)
	}
	packed, err := r.bin()
	if err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	nExtra := 0
	if !r.isNil() {
		if nExtra, err = r.arrayLen(); err != nil {
			return fmt.Errorf("extra counters: %w", err)
		}
	}
	if err := decodeCounters(packed, p, nExtra); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	for i := 0; i < nExtra; i++ {
		if m, err := r.arrayLen(); err != nil || m < 5 {
			return fmt.Errorf("extra counter %d: %v", i, err)
		}
		var c CounterDelta
		if c.Name, err = r.string(); err != nil {
			return fmt.Errorf("extra counter %d: %w", i, err)
		}
		vals := [4]uint64{}
		for j := range vals {
			if vals[j], err = r.uint(); err != nil {
				return fmt.Errorf("extra counter %s: %w", c.Name, err)
			}
		}
		if vals[0] > math.MaxUint8 || vals[3] > math.MaxUint8 {
			return fmt.Errorf("extra counter %s: source %d flags %d", c.Name, vals[0], vals[3])
		}
		c.Source, c.Delta, c.Value, c.Flags = Source(vals[0]), vals[1], vals[2], Flag(vals[3])
		p.Counters = append(p.Counters, c)
	}
	if !r.isNil() {
		ng, err := r.mapLen()
		if err != nil {
			return fmt.Errorf("gauges: %w", err)
		}
		p.Gauges = make(map[string]uint64, ng)
		for i := 0; i < ng; i++ {
			k, err := r.string()
			if err != nil {
				return fmt.Errorf("gauge %d: %w", i, err)
			}
			if p.Gauges[k], err = r.uint(); err != nil {
				return fmt.Errorf("gauge %s: %w", k, err)
			}
		}
	}
	return nil
}

func decodeCounters(b []byte, p *PortSample, nExtra int) error {
	r := &reader{b: b}
	nBitmap, err := r.uvarint()
	if err != nil {
		return err
	}
	if nBitmap > uint64(len(counterDict)+7)/8 {
		return fmt.Errorf("counter bitmap of %d bytes: written by a newer build with counters this one does not know", nBitmap)
	}
	bitmap, err := r.take(int(nBitmap))
	if err != nil {
		return err
	}
	present := 0
	for _, c := range bitmap {
		present += bits.OnesCount8(c)
	}
	p.Counters = make([]CounterDelta, present, present+nExtra)
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
	nonzero, err := r.take((present + 7) / 8)
	if err != nil {
		return err
	}
	for j := range p.Counters {
		if nonzero[j/8]&(1<<(j%8)) != 0 {
			if p.Counters[j].Delta, err = r.uvarint(); err != nil {
				return err
			}
		}
	}
	flagged, err := r.uvarint()
	if err != nil {
		return err
	}
	if flagged > uint64(present) {
		return fmt.Errorf("%d flagged of %d counters", flagged, present)
	}
	for k := uint64(0); k < flagged; k++ {
		at, err := r.uvarint()
		if err != nil {
			return err
		}
		if at >= uint64(present) {
			return fmt.Errorf("flag for counter %d of %d", at, present)
		}
		f, err := r.byte()
		if err != nil {
			return err
		}
		c := &p.Counters[at]
		c.Flags = Flag(f)
		if c.Value, err = r.uvarint(); err != nil {
			return err
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
