package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

// seqBase is added to every template batch's sequence number so that the
// wire carries it as a fixed-width uint64 (msgpack uint 64, 9 bytes) and a
// re-send can patch it in place. Any uint64 is a valid sequence.
const seqBase = 1 << 32

// template is one node's encoded batch of one template tick, and where its
// sequence number and data times sit in the bytes. Every data time is a
// positive int64 of unix milliseconds (> 2^32), which the codec writes as a
// fixed-width msgpack uint 64: re-timing is adding to 8 bytes in place, so
// the load generator publishes without encoding.
type template struct {
	node     int // index into the fleet's node names
	subject  string
	idPrefix string // the Nats-Msg-Id without its sequence: node/boot/
	data     []byte
	seqOff   int
	timeOffs []int // the batch's time, then each port's
	ports    int
	offset   time.Duration // of the batch's data time in its round
}

// templateTick is the fleet's batches of one reading round, at data time at.
type templateTick struct {
	at      int64 // unix ms
	batches []template
}

// fleetTemplates runs the simulated fleet (the load generator of test/bench:
// sim + the collector's delta engine) for ticks reading rounds after the
// baseline round, and keeps what each node would publish, encoded. The
// benchmark replays them re-timed, so the simulator and the delta engine,
// which run on every host of a real fleet, cost nothing during the
// measured window.
func fleetTemplates(ports, ticks int, interval time.Duration) (nodes []string, tt []templateTick, err error) {
	if ticks < 1 {
		return nil, nil, errors.New("templates: want at least one tick")
	}
	// One more round than kept: the first is every port's baseline (no
	// deltas), which a running fleet never sends again.
	cfg := bench.FleetConfig(ports, interval, time.Duration(ticks+2)*interval)
	cfg.Fabric = "bench-e2e"
	boot := "e2e-" + rand.Text()[:10]
	index := map[string]int{}
	round := 0
	err = bench.Run(cfg, func(t *bench.Tick) error {
		round++
		if round == 1 || len(tt) == ticks {
			return nil
		}
		tick := templateTick{at: t.Time.UnixMilli()}
		for _, b := range t.Batches {
			if len(b.Ports) == 0 {
				continue
			}
			i, ok := index[b.Node]
			if !ok {
				i = len(nodes)
				index[b.Node] = i
				nodes = append(nodes, b.Node)
			}
			b.BootID, b.Seq = boot, seqBase
			data, err := schemas.EncodeBatch(b)
			if err != nil {
				return fmt.Errorf("templates: %w", err)
			}
			tm, err := locate(data)
			if err != nil {
				return fmt.Errorf("templates: batch of %s: %w", b.Node, err)
			}
			tm.node, tm.subject, tm.idPrefix = i, schemas.CountersSubject(b.Node), b.Node+"/"+boot+"/"
			tm.offset = time.Duration(b.TimeMs-tick.at) * time.Millisecond
			if tm.offset < 0 || tm.offset >= interval {
				return fmt.Errorf("templates: batch of %s %s after its round: want within the interval", b.Node, tm.offset)
			}
			tick.batches = append(tick.batches, tm)
		}
		sort.SliceStable(tick.batches, func(i, j int) bool { return tick.batches[i].offset < tick.batches[j].offset })
		tt = append(tt, tick)
		return nil
	})
	if err == nil && len(tt) < ticks {
		err = fmt.Errorf("templates: the fleet gave %d reading rounds, want %d", len(tt), ticks)
	}
	return nodes, tt, err
}

// locate walks an encoded counter batch (schemas' wire v2: an array of
// version, node, boot id, seq, time, ports; each port an array whose
// seventh element is its time) and returns it as a template with the
// offsets of the sequence number and of every data time. A field that is
// not a fixed-width uint 64 is refused: it could not be patched in place.
func locate(data []byte) (template, error) {
	r := bytes.NewReader(data)
	d := msgpack.NewDecoder(r)
	pos := func() int { return len(data) - r.Len() }
	tm := template{data: data}
	fixed := func(what string) (int, error) {
		off := pos()
		if off+9 > len(data) || data[off] != msgpcode.Uint64 {
			return 0, fmt.Errorf("%s at byte %d is not a fixed-width uint 64", what, off)
		}
		return off, d.Skip()
	}
	skip := func(n int) error {
		for range n {
			if err := d.Skip(); err != nil {
				return err
			}
		}
		return nil
	}
	n, err := d.DecodeArrayLen()
	if err != nil {
		return tm, fmt.Errorf("batch: %w", err)
	}
	if n != 6 {
		return tm, fmt.Errorf("batch: %d fields, want 6", n)
	}
	if err := skip(3); err != nil { // version, node, boot id
		return tm, fmt.Errorf("batch header: %w", err)
	}
	if tm.seqOff, err = fixed("seq"); err != nil {
		return tm, err
	}
	off, err := fixed("batch time")
	if err != nil {
		return tm, err
	}
	tm.timeOffs = append(tm.timeOffs, off)
	if tm.ports, err = d.DecodeArrayLen(); err != nil {
		return tm, fmt.Errorf("ports: %w", err)
	}
	for i := range tm.ports {
		fields, err := d.DecodeArrayLen()
		if err != nil || fields < 7 {
			return tm, fmt.Errorf("port %d: %d fields (%v), want at least 7", i, fields, err)
		}
		if err := skip(6); err != nil {
			return tm, fmt.Errorf("port %d: %w", i, err)
		}
		if off, err = fixed(fmt.Sprintf("port %d time", i)); err != nil {
			return tm, err
		}
		tm.timeOffs = append(tm.timeOffs, off)
		if err := skip(fields - 7); err != nil {
			return tm, fmt.Errorf("port %d: %w", i, err)
		}
	}
	if pos() != len(data) {
		return tm, fmt.Errorf("%d bytes after the batch", len(data)-pos())
	}
	return tm, nil
}

// retime appends the template's bytes to dst[:0] with every data time
// moved by shift milliseconds and the sequence number seqBase+seq.
func (tm *template) retime(dst []byte, shift int64, seq uint64) []byte {
	dst = append(dst[:0], tm.data...)
	binary.BigEndian.PutUint64(dst[tm.seqOff+1:], seqBase+seq)
	for _, off := range tm.timeOffs {
		v := int64(binary.BigEndian.Uint64(tm.data[off+1:]))
		binary.BigEndian.PutUint64(dst[off+1:], uint64(v+shift))
	}
	return dst
}

// msgID is the Nats-Msg-Id of the template re-sent with sequence seq: the
// collector's node/boot/seq.
func (tm *template) msgID(seq uint64) string {
	return fmt.Sprintf("%s%d", tm.idPrefix, seqBase+seq)
}

// linkDowned is the counter a link flap raises (sysfs counters, 8-bit).
const linkDowned = "link_downed"

// withFlap is the template re-timed like retime, with the link of its port
// at index port going down once (link_downed +1) in this reading: what a
// collector sends after a flap. It re-encodes the batch, which the
// generator does for a few batches only.
func (tm *template) withFlap(shift int64, seq uint64, port int) ([]byte, *schemas.PortSample, error) {
	b, err := schemas.DecodeBatch(tm.data)
	if err != nil {
		return nil, nil, fmt.Errorf("flap: %w", err)
	}
	if port < 0 || port >= len(b.Ports) {
		return nil, nil, fmt.Errorf("flap: port %d of a batch of %d", port, len(b.Ports))
	}
	b.Seq = seqBase + seq
	b.TimeMs += shift
	for i := range b.Ports {
		b.Ports[i].TimeMs += shift
	}
	p := &b.Ports[port]
	found := false
	for i := range p.Counters {
		c := &p.Counters[i]
		if c.Source == schemas.SourceCounters && c.Name == linkDowned {
			c.Delta, c.Flags, found = c.Delta+1, 0, true
		}
	}
	if !found {
		p.Counters = append(p.Counters, schemas.CounterDelta{Name: linkDowned, Source: schemas.SourceCounters, Delta: 1})
	}
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		return nil, nil, fmt.Errorf("flap: %w", err)
	}
	return data, p, nil
}

// fleetTopology is the fabric of the fleet the templates come from, for
// the processors' --topology and migrate's.
func fleetTopology(ports int, interval time.Duration) (*sim.TopologyFile, error) {
	cfg := bench.FleetConfig(ports, interval, interval)
	cfg.Fabric = "bench-e2e"
	return sim.Topology(cfg)
}
