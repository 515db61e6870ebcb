package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// The fleet's configuration. Every processor reads the whole inventory
// stream, whatever partitions it owns: configs are small, and
// config_mismatch compares a port with its link's other end and with the
// whole fabric, which other instances own. Only the owned ports' incidents
// are raised (the detector emits for tracked ports only), so instances do
// not duplicate them.
//
// Data time: an inventory carries the data time it was read (TimeMs). A
// config read at t is known to fabric detectors at watermarks from about
// t on (one sync step later, see syncConfigs), whether the inventory
// reached the processor before or after the counters of that time. The
// processing goroutine itself reads the stream, at most every
// configSyncStep of data time before the fabric detectors run: nothing
// touches detector state from another goroutine. A replay is
// deterministic because a collector publishes a node's inventory before
// the counters of the same reading: once the processor has seen counters
// past the watermark wm, every inventory of a data time up to wm is on the
// stream, and a read asked for then gets it.
//
// Restarts and takeovers rebuild the state from the stream, which keeps the
// last 8 inventories per node (a node re-sends its inventory every 5 min):
// the read starts at the stream's first message.

// inventoryFetch is how many inventories one read asks for; a read asks
// again until it gets fewer.
const inventoryFetch = 256

// inventoryIdle is how long the server keeps the processor's inventory
// consumer without a read (ephemeral: nothing to clean up after a crash).
// A processor idle longer recreates it from where it was.
const inventoryIdle = 10 * time.Minute

// inventoryInfoTimeout bounds the request for the stream's info (see
// streamAhead): a server answers in milliseconds, and a refused request
// (a NATS user without the permission) is only ever answered by the
// timeout, which the processing goroutine waits out.
const inventoryInfoTimeout = 2 * time.Second

// inventoryInfoPause is how long the reader stops asking for the stream's
// info after a request failed.
const inventoryInfoPause = 10 * time.Minute

// errInventorySubject marks an inventory whose node is not its subject's.
var errInventorySubject = errors.New("inventory of another node")

// inventoryReader reads the inventory stream from the processing goroutine.
type inventoryReader struct {
	js   jetstream.JetStream
	name string
	log  *slog.Logger
	cons jetstream.Consumer
	// next is the stream sequence to read from when the consumer has to
	// be made again (it idled out, the server restarted).
	next uint64
	// pending is the read poll asked for, taken by the next poll.
	pending jetstream.MessageBatch
	// complete is the watermark up to which pending completes what was
	// handed over: the watermark of the sync that asked for it.
	complete schemas.Millis
	// infoAsked counts the requests for the stream's info; after one
	// failed, none is made before infoPausedUntil (wall time: it paces
	// requests, it decides nothing about the data).
	infoAsked       int
	infoPausedUntil time.Time
}

func (r *inventoryReader) open(ctx context.Context) error {
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     schemas.InventoryAllFilter,
		InactiveThreshold: inventoryIdle,
		MemoryStorage:     true,
		Metadata:          map[string]string{"rdmawatch": r.name + " inventory"},
	}
	if r.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.next
	}
	rctx, cancel := requestContext(ctx)
	defer cancel()
	cons, err := r.js.CreateConsumer(rctx, schemas.StreamInventory, cfg)
	if err != nil {
		return fmt.Errorf("inventory consumer: %w", err)
	}
	r.cons = cons
	return nil
}

// read hands every inventory stored now to fn, in stream order, waiting
// for the answers: the read at start.
func (r *inventoryReader) read(ctx context.Context, fn func(msg jetstream.Msg)) error {
	return r.readAll(ctx, fn, false)
}

// readAll is read; ahead says the caller found the stream ahead
// (streamAhead) after an empty answer, so an empty first answer here is
// already the second one and the consumer is made again without asking
// the stream once more.
func (r *inventoryReader) readAll(ctx context.Context, fn func(msg jetstream.Msg), ahead bool) error {
	if r.cons == nil {
		if err := r.open(ctx); err != nil {
			return err
		}
	}
	checked, reopened := ahead, false
	for {
		batch, err := r.cons.FetchNoWait(inventoryFetch)
		n := 0
		if err == nil {
			n, err = r.drain(batch, fn)
		}
		switch {
		case err != nil && reopened:
			return fmt.Errorf("read inventory: %w", err)
		case err != nil:
			// The consumer idled out or the server lost it: again from
			// where this one was.
		case n == inventoryFetch:
			continue // a full answer: there may be more
		case n > 0:
			return nil
		case !checked:
			// Nothing: is that so (see streamAhead)? If the stream
			// holds more, read once more, which tells a message stored
			// since the last answer from a consumer that miscounts.
			checked = true
			if !r.streamAhead(ctx) {
				return nil
			}
			continue
		case reopened:
			return nil
		}
		reopened = true
		if err := r.open(ctx); err != nil {
			return err
		}
	}
}

// streamAhead reports whether the stream holds an inventory at or past the
// next sequence the reader wants to hand over.
//
// Why it is asked: nats-server keeps a running count of a consumer's
// pending messages and answers a read without waiting "no messages" from
// that count alone. Under load (TestConfigsFollowDataTime with CPU burners,
// 1-3 % of runs) the count of the processor's consumer stayed one short:
// every later read got nothing while the stream held one more inventory,
// and each new inventory released only the one before it. The stream's
// own last sequence does not depend on that count, and a consumer made
// again from where the reader was counts afresh. It costs one request per
// sync that read nothing (the processor's NATS user may read the
// inventory stream's info, deploy/nats/rdmawatch-auth.conf). A user
// without that permission (an older auth file) gets no answer but the
// timeout: then the reader stops asking for inventoryInfoPause and reads
// as it did before the check, so a sync waits at most one timeout.
func (r *inventoryReader) streamAhead(ctx context.Context) bool {
	if time.Now().Before(r.infoPausedUntil) {
		return false
	}
	r.infoAsked++
	rctx, cancel := context.WithTimeout(ctx, inventoryInfoTimeout)
	defer cancel()
	s, err := r.js.Stream(rctx, schemas.StreamInventory)
	if err != nil {
		if ctx.Err() == nil {
			r.infoPausedUntil = time.Now().Add(inventoryInfoPause)
			if r.log != nil {
				r.log.Warn("inventory stream info refused or unanswered: a config change may go unseen until the next inventory arrives; does the processor's NATS user lack $JS.API.STREAM.INFO."+schemas.StreamInventory+"?",
					"err", err, "asked_again_in", inventoryInfoPause)
			}
		}
		return false
	}
	st := s.CachedInfo().State
	return st.Msgs > 0 && st.LastSeq >= max(r.next, 1)
}

// poll hands fn what the read asked for at the previous poll held (all of
// it, reading on while the answer was full), with wait also everything
// stored now, then asks again without waiting. Without wait, what poll
// hands over holds everything stored before the previous poll (and, when
// that answer was empty but the stream is ahead, what is stored now).
func (r *inventoryReader) poll(ctx context.Context, fn func(msg jetstream.Msg), wait bool) error {
	if r.pending != nil {
		batch := r.pending
		r.pending = nil
		n, err := r.drain(batch, fn)
		// A full answer may have more behind it; an empty one may be a
		// miscounting consumer (streamAhead). Either way read now.
		switch {
		case err != nil:
		case n == inventoryFetch:
			err = r.read(ctx, fn)
		case n == 0 && !wait && r.streamAhead(ctx):
			err = r.readAll(ctx, fn, true)
		}
		if err != nil {
			r.cons = nil // made again at the next poll, from where it was
			return fmt.Errorf("read inventory: %w", err)
		}
	}
	if wait {
		if err := r.read(ctx, fn); err != nil {
			r.cons = nil
			return err
		}
	}
	if r.cons == nil {
		if err := r.open(ctx); err != nil {
			return err
		}
	}
	batch, err := r.cons.FetchNoWait(inventoryFetch)
	if err != nil {
		r.cons = nil
		return fmt.Errorf("read inventory: %w", err)
	}
	r.pending = batch
	return nil
}

func (r *inventoryReader) drain(batch jetstream.MessageBatch, fn func(msg jetstream.Msg)) (int, error) {
	n := 0
	for msg := range batch.Messages() {
		n++
		if meta, err := msg.Metadata(); err == nil {
			r.next = meta.Sequence.Stream + 1
		}
		fn(msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return n, err
	}
	return n, nil
}

// configBook is the fleet's port configuration in data time: what has been
// applied (known, as of the watermark) and what was read for a later data
// time (queue). Only the processing goroutine touches it.
type configBook struct {
	known map[schemas.PortID]*processor.KnownConfig
	order []schemas.PortID // known's ids, sorted: a stable iteration
	queue []queuedConfig   // sorted by time, then arrival
	// nodes is what the latest inventory of each node lists, and
	// invQueue the inventories read for a later data time (ports.go).
	nodes    map[string]*nodeInventory
	invQueue []queuedInventory // sorted by time, then arrival
	// refused counts the inventories that did not decode or named another
	// node than their subject (the sink dead-letters them; the processor
	// reads without acknowledging, so it only counts them).
	refused uint64
	read    uint64
}

type queuedConfig struct {
	time schemas.Millis
	kc   processor.KnownConfig
}

func newConfigBook() *configBook {
	return &configBook{known: map[schemas.PortID]*processor.KnownConfig{}}
}

// add queues the configs of one inventory message. A port the inventory
// knows no config of is left as it was: unknown is never news.
func (b *configBook) add(subject string, data []byte) error {
	inv, err := schemas.DecodeInventory(data)
	if err == nil {
		if serr := schemas.CheckInventorySubject(subject, inv); serr != nil {
			err = fmt.Errorf("%w: %w", errInventorySubject, serr)
		}
	}
	if err != nil {
		b.refused++
		return err
	}
	b.read++
	b.queueInventoryPorts(inv)
	t := schemas.Millis(inv.TimeMs)
	for _, p := range inv.Ports {
		if p.Config.Empty() {
			continue
		}
		q := queuedConfig{time: t, kc: processor.KnownConfig{
			ID:        schemas.PortID{Node: inv.Node, Device: p.Device, Port: p.Port},
			LinkLayer: p.LinkLayer, Netdev: p.Netdev, Since: t, Read: t, Config: p.Config,
		}}
		// Inventories come in data-time order but for the odd node whose
		// clock or spool is behind: insert after every entry not later.
		i := sort.Search(len(b.queue), func(i int) bool { return b.queue[i].time > t })
		b.queue = append(b.queue, queuedConfig{})
		copy(b.queue[i+1:], b.queue[i:])
		b.queue[i] = q
	}
	return nil
}

// apply makes the configs read at or before wm known, and the port counts
// of the inventories (ports.go); it returns how many ports' configs
// changed.
func (b *configBook) apply(wm schemas.Millis) int {
	b.applyInventoryPorts(wm)
	n := 0
	for n < len(b.queue) && b.queue[n].time <= wm {
		n++
	}
	changed := 0
	for i := range b.queue[:n] {
		if b.set(&b.queue[i].kc) {
			changed++
		}
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	return changed
}

func (b *configBook) set(kc *processor.KnownConfig) bool {
	cur, ok := b.known[kc.ID]
	if !ok {
		v := *kc
		b.known[kc.ID] = &v
		i := sort.Search(len(b.order), func(i int) bool { return !portLess(b.order[i], kc.ID) })
		b.order = append(b.order, schemas.PortID{})
		copy(b.order[i+1:], b.order[i:])
		b.order[i] = kc.ID
		return true
	}
	if kc.Read < cur.Read {
		return false // an older reading than the one applied
	}
	cur.LinkLayer, cur.Netdev, cur.Read = kc.LinkLayer, kc.Netdev, kc.Read
	if cur.Config.Equal(kc.Config) {
		return false // confirmed: still the config it has been since Since
	}
	cur.Config, cur.Since = kc.Config, kc.Since
	return true
}

// evict forgets the configs of ports no inventory confirmed since before:
// nodes gone from the fleet.
func (b *configBook) evict(before schemas.Millis) int {
	b.evictInventoryPorts(before)
	var n int
	b.order, n = evictOrdered(b.order, b.known, func(c *processor.KnownConfig) bool { return c.Read < before })
	return n
}

// PortConfig implements processor.ConfigView.
func (f *fabric) PortConfig(id schemas.PortID) (processor.KnownConfig, bool) {
	if f.configs == nil {
		return processor.KnownConfig{}, false
	}
	kc, ok := f.configs.known[id]
	if !ok {
		return processor.KnownConfig{}, false
	}
	return *kc, true
}

// Configs implements processor.ConfigView.
func (f *fabric) Configs(fn func(*processor.KnownConfig) bool) {
	if f.configs == nil {
		return
	}
	for _, id := range f.configs.order {
		if !fn(f.configs.known[id]) {
			return
		}
	}
}

// configSyncStep is the data time between two reads of the inventory
// stream: a quarter of the allowed lateness (about a quarter of an
// interval), at least a tick. A config read at t is then known by the
// watermark t plus two steps and a tick, well within the two intervals
// config_mismatch has, and a fleet read every second does not ask the
// server four times a second.
func (p *Processor) configSyncStep() schemas.Millis {
	return max(p.tick(), p.lateness()/4)
}

// syncConfigs applies the configs read up to a watermark it knows every
// inventory of, and asks for what comes next. A read asked for at the
// previous sync holds every inventory of a data time up to that sync's
// watermark (see above): taking it now and applying up to that watermark
// costs the processing goroutine no wait for a round trip, at the price of
// one sync step. When the watermark jumped further since (a small fleet
// read all at once, then nothing for an interval), that price would be a
// whole interval: then it reads what the stream holds now, waiting, and
// applies up to the current watermark. Either way what is applied depends
// on the data only, never on how fast the server answered: a replay stays
// deterministic. A read that fails is logged and tried again at the next
// sync; the configs known stay as they were.
func (p *Processor) syncConfigs(ctx context.Context, wm schemas.Millis) {
	if p.inventory == nil {
		return
	}
	complete := p.inventory.complete
	wait := wm-complete > 2*p.configSyncStep()
	if err := p.inventory.poll(ctx, func(m jetstream.Msg) { p.addInventory(ctx, m) }, wait); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("inventory stream; configs are read again at the next sync", "err", err)
		}
	} else {
		if wait {
			complete = wm
		}
		p.inventory.complete = wm
	}
	p.fabric.configs.apply(complete)
	p.st.inventories.Store(p.fabric.configs.read)
	p.st.inventoriesRefused.Store(p.fabric.configs.refused)
	p.st.configPorts.Store(uint64(len(p.fabric.configs.known)))
}

// addInventory hands an inventory to the config book. One the book
// refuses is dead-lettered, as the sink does, so the refusal can be found
// and the message examined later instead of only read in a log line; a
// failed copy is logged and the processing goes on (the configs are
// advisory, the counters are not).
func (p *Processor) addInventory(ctx context.Context, msg jetstream.Msg) {
	err := p.fabric.configs.add(msg.Subject(), msg.Data())
	if err == nil {
		return
	}
	p.log.Warn("inventory refused; its configs are not used", "subject", msg.Subject(), "err", err)
	var seq uint64
	if md, merr := msg.Metadata(); merr == nil {
		seq = md.Sequence.Stream
	}
	if _, known := p.deadInventory[seq]; known && seq != 0 {
		return
	}
	reason := ReasonDecode
	if errors.Is(err, errInventorySubject) {
		reason = ReasonSpoofedNode
	}
	if err := p.copyDeadLetter(ctx, msg, seq, reason+": "+err.Error()); err != nil {
		if ctx.Err() == nil {
			p.log.Error("inventory not dead-lettered", "subject", msg.Subject(), "stream_seq", seq, "err", err)
		}
		return
	}
	if p.deadInventory == nil {
		p.deadInventory = map[uint64]struct{}{}
	}
	p.deadInventory[seq] = struct{}{}
	p.st.inventoryDeadLetters.Add(1)
}
