// Package engine runs the detectors of package processor over the counters
// stream: it consumes the partitions this instance owns from JetStream, keeps
// the per-port state and the watermark in data time, calls the detectors and
// publishes their events.
//
// Determinism: one ordered consumer with one filter per owned partition (no
// filter when the instance owns them all)
// delivers the owned messages in stream order, and one goroutine handles
// them one by one. The same stream therefore gives the same events in the
// same order on every run, across partitions too, and the watermark cannot
// be pushed ahead by one partition being read faster than another.
//
// Refusals: a message that does not decode, whose batch names another node
// than its subject, or whose handling panics, and the samples dated
// implausibly (plausible.go), are refused, counted in Stats and copied to
// the dead-letter stream with the reason (refuse.go); the processor goes
// on. Restarts: the events stream's own history says which incident
// revisions are already published (published.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Stats are a processor's counters, one consistent-enough snapshot for
// monitoring; every field is safe to read while it runs.
type Stats struct {
	// Processed counts the counters-stream messages handled, including the
	// refused ones.
	Processed uint64
	// Samples were accepted and went to the detectors.
	Samples uint64
	// StaleSamples were not newer than their port's last sample: duplicates
	// and out-of-order redeliveries, dropped before the detectors.
	StaleSamples uint64
	// LateSamples arrived behind the watermark: port detectors saw them,
	// fabric detectors may have decided without them. They are counted in
	// Samples too.
	LateSamples uint64
	// PortsPerNodeRefused are samples of new ports beyond their node's
	// bound (ports.go), refused; their message was dead-lettered once per
	// node.
	PortsPerNodeRefused uint64
	// ImplausibleSamples were refused for their data time (see
	// plausible.go); their message was dead-lettered, the plausible samples
	// of the same message were used. A message the decoder refuses as a
	// whole (a time outside 2000..2100) counts once.
	ImplausibleSamples uint64
	// DecodeErrors, SpoofedNode and Panics count whole messages refused:
	// undecodable, a batch whose node is not its subject's, a panic while
	// decoding or applying it.
	DecodeErrors uint64
	SpoofedNode  uint64
	Panics       uint64
	// DeadLetters were copied to the dead-letter stream by this run;
	// DeadLettersKnown were refused again while re-reading the stream and
	// found there already, from a previous run.
	DeadLetters      uint64
	DeadLettersKnown uint64
	// InventoryDeadLetters are the inventories this run copied to the
	// dead-letter stream (refused: see InventoriesRefused).
	InventoryDeadLetters uint64
	Events               uint64
	// DuplicateEvents were dropped by the events stream's de-duplication.
	DuplicateEvents uint64
	// KnownEvents were decided again (a warm-up, a re-run over the same
	// stream) and found on the events stream already: not published.
	KnownEvents uint64
	// Ports is the number of tracked ports.
	Ports uint64
	// Inventories counts the inventory messages read (every node's, see
	// inventory.go), InventoriesRefused those that did not decode or named
	// another node than their subject, ConfigPorts the ports whose
	// configuration is known at the watermark.
	Inventories, InventoriesRefused, ConfigPorts uint64
	// Watermark is the processor's watermark (one for all its partitions:
	// they are read in stream order by one goroutine).
	Watermark schemas.Millis
	// PartitionsOwned is len(Partitions).
	PartitionsOwned int
	Partitions      []PartitionStats
	// Incidents counts the events this run decided, by incident type and
	// state (open, update, resolved), whether it published them or found
	// them on the events stream already; OpenIncidents counts the
	// incidents open now, by type.
	Incidents     map[string]map[string]uint64
	OpenIncidents map[string]uint64
}

// PartitionStats is one owned partition.
type PartitionStats struct {
	Partition int
	// Samples accepted from the partition.
	Samples uint64
	// DataTime is the newest accepted data time of the partition, 0 before
	// the first sample.
	DataTime schemas.Millis
	// Lag is how far DataTime is behind the wall clock at the snapshot (the
	// processing delay of a live fleet; large in a replay of old data), 0
	// before the first sample.
	Lag time.Duration
	// WatermarkLag is how far the processor's watermark is behind DataTime.
	WatermarkLag time.Duration
}

type stats struct {
	processed, samples, stale, late, implausible          atomic.Uint64
	portsRefused                                          atomic.Uint64
	decodeErrors, spoofed, panics, deadLetters, deadKnown atomic.Uint64
	events, dupEvents, known, ports                       atomic.Uint64
	inventories, inventoriesRefused, configPorts          atomic.Uint64
	inventoryDeadLetters                                  atomic.Uint64
	watermark                                             atomic.Int64
	// parts is indexed like Processor.owned.
	parts []partStats

	mu        sync.Mutex
	incidents map[string]map[string]uint64
	open      map[string]map[string]struct{} // type -> open incident ids
}

type partStats struct {
	samples  atomic.Uint64
	dataTime atomic.Int64
}

// Processor consumes counter batches and publishes incident events.
type Processor struct {
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	// decoder is the processing goroutine's: a batch is read once and
	// nothing of it is kept (processor.Sample), so its memory is reused.
	decoder schemas.BatchDecoder

	owned     []int
	portDets  []processor.PortDetector
	fabDets   []processor.FabricDetector
	fabric    *fabric
	inventory *inventoryReader // nil until Run opened it
	started   atomic.Bool
	st        stats
	startWall time.Time

	// Data-time state of the processing goroutine.
	maxTime   schemas.Millis
	nextTick  schemas.Millis
	nextEvict schemas.Millis
	// nextConfigSync is when the inventory stream is read next (inventory.go).
	nextConfigSync schemas.Millis
	pending        []*schemas.Event
	intervals      intervalEstimator
	// sample is the one being processed: reused, so that handing it to the
	// detectors (through an interface, it escapes) costs no allocation.
	sample processor.Sample
	// partIndex maps a partition to its index in owned (-1: not owned).
	partIndex []int

	// What previous runs left on the streams, read at the start of Run:
	// the last published revision per incident id and the incidents left
	// open (published.go), and the counters sequences already
	// dead-lettered. Pruned once caught up with the counters stream.
	published *publishedLog
	deadKnown map[uint64]struct{}
	// refusedNodes are the nodes and reasons whose refusal was
	// dead-lettered by this run: once each (ports.go).
	refusedNodes map[refusedKey]struct{}
	// deadInventory are the inventory-stream sequences dead-lettered by
	// this or an earlier run: every run re-reads the whole inventory
	// stream, and must not copy the same bad inventory again each time.
	deadInventory map[uint64]struct{}
	caughtUp      bool
	// events is the events stream, for the message a duplicate publish
	// names (afterDuplicate); looked up on the first duplicate.
	events jetstream.Stream
}

// New checks the config and builds the detectors; Run does the work.
func New(js jetstream.JetStream, cfg Config, log *slog.Logger) (*Processor, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dets := cfg.Detectors
	if dets == nil {
		build := cfg.NewDetectors
		if build == nil {
			build = func() ([]processor.Detector, error) { return processor.NewDetectors(cfg.DetectorNames...) }
		}
		var err error
		if dets, err = build(); err != nil {
			return nil, err
		}
		if cfg.ConfigureDetectors != nil {
			if err := cfg.ConfigureDetectors(dets); err != nil {
				return nil, err
			}
		}
	}
	p := &Processor{js: js, cfg: cfg, owned: cfg.owned()}
	p.partIndex = make([]int, cfg.Partitions)
	for i := range p.partIndex {
		p.partIndex[i] = -1
	}
	for i, part := range p.owned {
		p.partIndex[part] = i
	}
	p.st.parts = make([]partStats, len(p.owned))
	p.st.incidents = map[string]map[string]uint64{}
	p.st.open = map[string]map[string]struct{}{}
	p.log = log.With("instance", cfg.Instance, "partitions", p.owned)
	p.fabric = newFabric(cfg.Topology, len(p.owned) == cfg.Partitions)
	for _, d := range dets {
		if in, ok := d.(processor.Initializer); ok {
			if err := in.Init(p.fabric); err != nil {
				return nil, fmt.Errorf("detector %s: %w", d.Name(), err)
			}
		}
		pd, isPort := d.(processor.PortDetector)
		fd, isFabric := d.(processor.FabricDetector)
		if !isPort && !isFabric {
			return nil, fmt.Errorf("%w: detector %s implements neither PortDetector nor FabricDetector", ErrInvalidConfig, d.Name())
		}
		if isPort {
			p.portDets = append(p.portDets, pd)
		}
		if isFabric {
			p.fabDets = append(p.fabDets, fd)
		}
	}
	return p, nil
}

// Partitions returns the partitions this processor owns.
func (p *Processor) Partitions() []int { return append([]int(nil), p.owned...) }

// Processed is the number of counters-stream messages handled so far,
// events published included. replay waits for it to reach the number of
// messages in the stream (stream info State.Msgs, summed over instances).
func (p *Processor) Processed() uint64 { return p.st.processed.Load() }

// Stats returns a snapshot of the processor's counters.
func (p *Processor) Stats() Stats {
	st := Stats{
		Processed:            p.st.processed.Load(),
		Samples:              p.st.samples.Load(),
		StaleSamples:         p.st.stale.Load(),
		LateSamples:          p.st.late.Load(),
		ImplausibleSamples:   p.st.implausible.Load(),
		PortsPerNodeRefused:  p.st.portsRefused.Load(),
		DecodeErrors:         p.st.decodeErrors.Load(),
		SpoofedNode:          p.st.spoofed.Load(),
		Panics:               p.st.panics.Load(),
		DeadLetters:          p.st.deadLetters.Load(),
		DeadLettersKnown:     p.st.deadKnown.Load(),
		InventoryDeadLetters: p.st.inventoryDeadLetters.Load(),
		Events:               p.st.events.Load(),
		DuplicateEvents:      p.st.dupEvents.Load(),
		KnownEvents:          p.st.known.Load(),
		Ports:                p.st.ports.Load(),
		Inventories:          p.st.inventories.Load(),
		InventoriesRefused:   p.st.inventoriesRefused.Load(),
		ConfigPorts:          p.st.configPorts.Load(),
		Watermark:            schemas.Millis(p.st.watermark.Load()),
		PartitionsOwned:      len(p.owned),
		Partitions:           make([]PartitionStats, len(p.owned)),
		Incidents:            map[string]map[string]uint64{},
		OpenIncidents:        map[string]uint64{},
	}
	now := time.Now().UnixMilli()
	for i, part := range p.owned {
		ps := PartitionStats{Partition: part, Samples: p.st.parts[i].samples.Load(), DataTime: schemas.Millis(p.st.parts[i].dataTime.Load())}
		if ps.DataTime > 0 {
			ps.Lag = time.Duration(now-int64(ps.DataTime)) * time.Millisecond
			if st.Watermark > 0 {
				ps.WatermarkLag = time.Duration(ps.DataTime-st.Watermark) * time.Millisecond
			}
		}
		st.Partitions[i] = ps
	}
	p.st.mu.Lock()
	for typ, byState := range p.st.incidents {
		m := make(map[string]uint64, len(byState))
		for state, n := range byState {
			m[state] = n
		}
		st.Incidents[typ] = m
	}
	for typ, ids := range p.st.open {
		st.OpenIncidents[typ] = uint64(len(ids))
	}
	p.st.mu.Unlock()
	return st
}

// countEvent notes a published event for Stats.
func (s *stats) countEvent(ev *schemas.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byState := s.incidents[ev.Type]
	if byState == nil {
		byState = map[string]uint64{}
		s.incidents[ev.Type] = byState
	}
	byState[ev.State]++
	open := s.open[ev.Type]
	if open == nil {
		open = map[string]struct{}{}
		s.open[ev.Type] = open
	}
	if ev.State == schemas.StateResolved {
		delete(open, ev.ID)
	} else {
		open[ev.ID] = struct{}{}
	}
}

var partitionsInTransform = regexp.MustCompile(`partition\((\d+)`)

// Run consumes until ctx is cancelled (then it returns nil) or the stream is
// unusable. It may be called once.
func (p *Processor) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("processor: Run called twice")
	}
	occ, err := p.countersConsumer(ctx)
	if err != nil {
		return err
	}
	if err := p.readHistory(ctx, occ); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	rctx, cancel := requestContext(ctx)
	cons, err := p.js.OrderedConsumer(rctx, schemas.StreamCounters, *occ)
	cancel()
	if err != nil {
		return fmt.Errorf("counters consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("counters consumer: %w", err)
	}
	defer it.Stop()
	var filters any = occ.FilterSubjects
	if len(occ.FilterSubjects) == 0 {
		filters = "none: every partition"
	}
	p.log.Info("processor started", "filters", filters, "start", occ.DeliverPolicy.String())
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		// Nothing to read in its partitions: caught up already, rather
		// than at the first message, which may be long in coming (a
		// partition no node hashes to).
		if err := p.catchUp(ctx, 0); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}

	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("counters consumer: %w", err)
			}
			// The ordered consumer recreates itself after gaps and
			// server restarts; anything left is transient.
			p.log.Warn("counters consumer", "err", err)
			if retry.Sleep(ctx, 200*time.Millisecond) != nil {
				return nil
			}
			continue
		}
		if err := p.handle(ctx, msg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// countersConsumer checks the counters stream against the config and says
// what the processor reads of it: the owned partitions, from the start
// (StartAll) or from the warm-up's start.
func (p *Processor) countersConsumer(ctx context.Context) (*jetstream.OrderedConsumerConfig, error) {
	rctx, cancel := requestContext(ctx)
	stream, err := p.js.Stream(rctx, schemas.StreamCounters)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("counters stream: %w", err)
	}
	if tr := stream.CachedInfo().Config.SubjectTransform; tr != nil {
		if m := partitionsInTransform.FindStringSubmatch(tr.Destination); m != nil {
			if n, _ := strconv.Atoi(m[1]); n != p.cfg.Partitions {
				return nil, fmt.Errorf("%w: the counters stream has %d partitions, config says %d", ErrInvalidConfig, n, p.cfg.Partitions)
			}
		}
	}
	// No fixed consumer name: an ordered consumer of a previous run (or of
	// the old process in a rolling restart) may still exist on the server,
	// and reusing its name would hand us its cursor.
	occ := &jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Metadata:      map[string]string{"rdmawatch": fmt.Sprintf("%s instance %d", p.cfg.Name, p.cfg.Instance)},
	}
	// Owning every partition, the consumer has no filter (why:
	// schemas.CountersAllFilter).
	if len(p.owned) < p.cfg.Partitions {
		for _, part := range p.owned {
			occ.FilterSubjects = append(occ.FilterSubjects, schemas.CountersPartitionFilter(part))
		}
	}
	p.startWall = time.Now()
	if p.cfg.Start == StartWarmUp {
		from := p.cfg.StartTime
		if from.IsZero() {
			from = p.startWall.Add(-p.cfg.WarmUp)
		}
		occ.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		occ.OptStartTime = &from
	}
	return occ, nil
}

// readHistory reads what a previous run left on the streams before the
// first counters message: events published (since the warm-up's start less
// WarmUp, see published.go), messages dead-lettered (a dead letter is
// stored after the message it copies, so since the warm-up's start; the
// whole history for StartAll), and the fleet's configuration (every
// inventory the stream keeps, inventory.go).
func (p *Processor) readHistory(ctx context.Context, occ *jetstream.OrderedConsumerConfig) error {
	var eventsFrom, deadFrom time.Time
	if occ.OptStartTime != nil {
		eventsFrom, deadFrom = occ.OptStartTime.Add(-p.cfg.WarmUp), *occ.OptStartTime
	}
	var unreadable int
	var err error
	if p.published, unreadable, err = loadPublished(ctx, p.js, eventsFrom); err != nil {
		return err
	}
	if p.deadKnown, err = loadDeadLetters(ctx, p.js, schemas.StreamCounters, deadFrom); err != nil {
		return err
	}
	if p.deadInventory, err = loadDeadLetters(ctx, p.js, schemas.StreamInventory, time.Time{}); err != nil {
		return err
	}
	p.inventory = &inventoryReader{js: p.js, name: fmt.Sprintf("%s instance %d", p.cfg.Name, p.cfg.Instance), log: p.log}
	if err := p.inventory.read(ctx, func(m jetstream.Msg) { p.addInventory(ctx, m) }); err != nil {
		return err
	}
	p.log.Info("history read", "incidents", len(p.published.last), "unreadable_events", unreadable, "dead_letters", len(p.deadKnown),
		"inventories", p.fabric.configs.read, "inventories_refused", p.fabric.configs.refused)
	return nil
}

// handle processes one message: decode, check, detectors, publish, count.
// A message refused (undecodable, spoofed, implausible time, a panic while
// applying it) is copied to the dead-letter stream with the reason, and
// the processor goes on: one poison message must never stop detection for
// the fleet, nor crash the processor again on every restart while it
// re-reads the stream.
func (p *Processor) handle(ctx context.Context, msg jetstream.Msg) error {
	var seq, pending uint64
	var storedMs int64
	if meta, err := msg.Metadata(); err == nil {
		seq, pending, storedMs = meta.Sequence.Stream, meta.NumPending, meta.Timestamp.UnixMilli()
	}
	p.pending = p.pending[:0]
	reason := p.apply(ctx, msg, storedMs)
	// Events decided before a panic are published all the same: their
	// tracker counted them, and a missing revision would leave a gap.
	for _, ev := range p.pending {
		if err := p.publish(ctx, ev); err != nil {
			return err
		}
	}
	clear(p.pending)
	p.pending = p.pending[:0]
	if reason != "" {
		p.log.Warn("refused counters message", "stream_seq", seq, "subject", msg.Subject(), "reason", reason)
		if err := p.deadLetter(ctx, msg, seq, reason); err != nil {
			return err
		}
	}
	if !p.caughtUp && pending == 0 {
		if err := p.catchUp(ctx, seq); err != nil {
			return err
		}
	}
	p.st.processed.Add(1)
	return nil
}

// catchUp runs once, when every message stored when the history was read
// has been read (seq is the last of them, 0 when the processor's partitions
// held none): none of them can be refused again. After a warm-up,
// incidents it did not decide again cannot come back either, and the ones
// this processor owns are resolved; a StartAll run may be reading a stream
// still being filled (replay), so it keeps them.
func (p *Processor) catchUp(ctx context.Context, seq uint64) error {
	p.caughtUp = true
	p.deadKnown = nil
	var (
		forgotten int
		others    []string
		resolve   []*schemas.Event
	)
	if p.cfg.Start == StartWarmUp {
		forgotten, others, resolve = p.published.caughtUp(p.resolves, p.fabric.Watermark())
	}
	// others: left open on the stream, not decided again, and not this
	// processor's to resolve (a port another instance reads, or fabric
	// scope, which the reader of partition 0 ends when nobody reads every
	// partition): named, so an incident that stays open can be traced.
	p.log.Info("caught up with the counters stream", "stream_seq", seq, "incidents_forgotten", forgotten,
		"left_open_not_found_again", len(others)+len(resolve), "resolved_not_found_again", len(resolve),
		"left_to_others", others[:min(len(others), 10)])
	for _, ev := range resolve {
		if err := p.publish(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// apply decodes, checks and processes one message; it returns why the
// message is refused, "" when it is not. A panic anywhere in there refuses
// the message instead of killing the processor.
func (p *Processor) apply(ctx context.Context, msg jetstream.Msg, storedMs int64) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			p.sample = processor.Sample{}
			p.st.panics.Add(1)
			reason = fmt.Sprintf("%s: %v", ReasonPanic, r)
			p.log.Error("panic while applying a counters message", "subject", msg.Subject(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	batch, err := p.decoder.Decode(msg.Data())
	if errors.Is(err, schemas.ErrImplausibleTime) {
		// Outside any plausible data time: the decoder refuses the whole
		// message before a sample could move a watermark.
		p.st.implausible.Add(1)
		return ReasonImplausibleTime + ": " + err.Error()
	}
	if err != nil {
		p.st.decodeErrors.Add(1)
		return ReasonDecode + ": " + err.Error()
	}
	if err := schemas.CheckBatchSubject(msg.Subject(), batch); err != nil {
		p.st.spoofed.Add(1)
		return ReasonSpoofedNode + ": " + err.Error()
	}
	part := -1
	if n := partitionOf(msg.Subject()); n >= 0 && n < len(p.partIndex) {
		part = p.partIndex[n]
	}
	return p.process(ctx, batch, storedMs, part)
}

// process runs the detectors over one batch stored at storedMs (0:
// unknown) from the part-th owned partition (-1: unknown). It returns why
// samples were refused, "" when none was.
func (p *Processor) process(ctx context.Context, b *schemas.CounterBatch, storedMs int64, part int) string {
	bt := batchTally{limit: p.aheadLimit(storedMs), storedMs: storedMs, nodePorts: p.fabric.byNode[b.Node], portLimit: -1}
	for i := range b.Ports {
		p.processSample(ctx, b, &b.Ports[i], &bt)
	}
	p.sample = processor.Sample{} // keep no reference to the batch
	p.maxTime = max(p.maxTime, bt.newest)
	p.addTally(&bt, part)
	reason := bt.refused.reason(len(b.Ports))
	if bt.tooMany.n > 0 {
		p.st.portsRefused.Add(uint64(bt.tooMany.n))
		if p.refusedOnce(b.Node, ReasonPortsPerNode) {
			reason = joinReasons(reason, bt.tooMany.reason(b.Node, len(b.Ports)))
		}
	}
	p.advance(ctx)
	return reason
}

// batchTally is what process keeps over one batch. The counters are added
// once per batch (addTally): an atomic add per sample costs more than the
// bookkeeping it does.
type batchTally struct {
	limit    schemas.Millis // the latest plausible time (0: none)
	storedMs int64
	// nodePorts are the batch node's ports; portLimit the node's bound on
	// them (-1 until a new port asks for it), limitKnown as portLimit says.
	nodePorts            []nodePort
	portLimit            int
	limitKnown           bool
	samples, stale, late uint64
	newest               schemas.Millis
	refused              implausible
	tooMany              tooManyPorts
}

// processSample runs the port detectors over one sample of the batch,
// unless its time is implausible, its port is beyond the node's bound or
// it is no newer than the port's last.
func (p *Processor) processSample(ctx context.Context, b *schemas.CounterBatch, ps *schemas.PortSample, bt *batchTally) {
	t := schemas.Millis(ps.TimeMs)
	if t == 0 {
		t = schemas.Millis(b.TimeMs)
	}
	if t <= 0 || (bt.limit > 0 && t > bt.limit) {
		// Before anything is touched: an implausible time must not
		// reach a port's LastTime nor the watermark.
		bt.refused.add(schemas.PortID{Node: b.Node, Device: ps.Device, Port: ps.Port}, t, p.maxTime, bt.storedMs)
		return
	}
	id := schemas.PortID{Node: b.Node, Device: ps.Device, Port: ps.Port}
	port := p.samplePort(id, ps, t, bt)
	if port == nil {
		return
	}
	if port.Samples > 0 && t <= port.LastTime {
		bt.stale++
		return
	}
	bt.samples++
	if t < p.fabric.wm {
		bt.late++
	}
	p.sample = processor.Sample{ID: id, Time: t, PortSample: ps}
	s := &p.sample
	for _, d := range p.portDets {
		d.OnSample(ctx, port, s, (*emitter)(p))
	}
	port.Observe(s)
	p.intervals.observe(ps.IntervalMs)
	bt.newest = max(bt.newest, t)
}

// samplePort is the state of the sample's port, made for a port not seen
// before; nil when that port is beyond the node's bound.
func (p *Processor) samplePort(id schemas.PortID, ps *schemas.PortSample, t schemas.Millis, bt *batchTally) *processor.PortState {
	port := find(bt.nodePorts, ps.Device, ps.Port)
	if port != nil {
		return port
	}
	if bt.portLimit < 0 {
		bt.portLimit, bt.limitKnown = p.portLimit(id.Node, t)
	}
	if len(bt.nodePorts) >= bt.portLimit {
		// Before anything is touched: a port beyond the
		// node's bound takes no memory (ports.go).
		bt.tooMany.add(ps.Device, ps.Port, len(bt.nodePorts), bt.portLimit, bt.limitKnown)
		return nil
	}
	port = p.fabric.get(id)
	bt.nodePorts = p.fabric.byNode[id.Node]
	p.st.ports.Store(uint64(len(p.fabric.ports)))
	return port
}

// addTally adds the batch's samples (to its partition's too, with its
// newest data time), stale and late samples and implausible times to the
// processor's counters.
func (p *Processor) addTally(bt *batchTally, part int) {
	if bt.samples > 0 {
		p.st.samples.Add(bt.samples)
		if part >= 0 {
			ps := &p.st.parts[part]
			ps.samples.Add(bt.samples)
			if int64(bt.newest) > ps.dataTime.Load() {
				ps.dataTime.Store(int64(bt.newest))
			}
		}
	}
	if bt.stale > 0 {
		p.st.stale.Add(bt.stale)
	}
	if bt.late > 0 {
		p.st.late.Add(bt.late)
	}
	if bt.refused.n > 0 {
		p.st.implausible.Add(uint64(bt.refused.n))
	}
}

// joinReasons joins the refusals of one message for its dead letter.
func joinReasons(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// advance moves the watermark and runs what hangs on it.
func (p *Processor) advance(ctx context.Context) {
	wm := p.maxTime - p.lateness()
	if wm <= p.fabric.wm {
		return
	}
	p.fabric.wm = wm
	p.st.watermark.Store(int64(wm))
	// The next steps are set before the calls: a detector that panics (and
	// so refuses the message being applied) is not called again for every
	// following message, only at the next tick.
	if wm >= p.nextEvict {
		first := p.nextEvict == 0
		p.nextEvict = wm + schemas.Millis(time.Minute.Milliseconds())
		if !first {
			if n := p.fabric.evict(wm - schemas.Millis(p.cfg.PortTTL.Milliseconds())); n > 0 {
				p.log.Info("forgot silent ports", "ports", n, "watermark", wm)
				p.st.ports.Store(uint64(len(p.fabric.ports)))
			}
			if n := p.fabric.configs.evict(wm - schemas.Millis(p.cfg.PortTTL.Milliseconds())); n > 0 {
				p.log.Info("forgot the configs of ports no inventory confirmed", "ports", n, "watermark", wm)
			}
		}
	}
	if wm >= p.nextTick {
		p.nextTick = wm + p.tick()
		if wm >= p.nextConfigSync {
			p.nextConfigSync = wm + p.configSyncStep()
			p.syncConfigs(ctx, wm)
		}
		for _, d := range p.fabDets {
			d.OnWatermark(ctx, p.fabric, wm, (*emitter)(p))
		}
	}
}

// emitter is the processor.Emitter the detectors get: events wait until the
// message that caused them is processed. Not exported: only the processing
// goroutine may emit.
type emitter Processor

// Resume implements processor.Resumer from the events stream's history.
func (e *emitter) Resume(typ, scope string, subject schemas.Subject, id string, start schemas.Millis) (processor.Resumed, bool) {
	return (*Processor)(e).published.resume(typ, scope, subject, id, start)
}

func (e *emitter) Emit(ev *schemas.Event) {
	p := (*Processor)(e)
	if err := ev.Validate(); err != nil {
		p.log.Error("detector emitted an invalid event; dropped", "type", ev.Type, "err", err)
		return
	}
	p.pending = append(p.pending, ev)
}

// publish sends one event, retrying until it is stored or ctx ends: an
// event decided is never dropped, and a retry that did reach the stream is
// dropped there by its Nats-Msg-Id.
func (p *Processor) publish(ctx context.Context, ev *schemas.Event) error {
	p.st.countEvent(ev)
	ok, rev := p.published.decide(ev)
	if !ok {
		p.st.known.Add(1)
		return nil
	}
	if rev != ev.Revision {
		// A copy: the detector that emitted ev may still hold it.
		renumbered := *ev
		renumbered.Revision = rev
		p.log.Info("resolution renumbered after the events stream's last revision", "id", ev.ID, "decided", ev.Revision, "published", rev)
		ev = &renumbered
	}
	data, err := schemas.EncodeEvent(ev)
	if err != nil {
		p.log.Error("cannot encode event; dropped", "id", ev.ID, "err", err)
		return nil
	}
	b := retry.NewBackoff(retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second})
	for renumbered := 0; ; {
		ack, err := p.js.Publish(ctx, schemas.EventSubject(ev), data, jetstream.WithMsgID(ev.MsgID()))
		if err == nil && !ack.Duplicate {
			p.st.events.Add(1)
			return nil
		}
		if err == nil {
			p.st.dupEvents.Add(1)
			var next *schemas.Event
			if next, err = p.afterDuplicate(ctx, ev, ack.Sequence); err == nil {
				if next == nil {
					return nil
				}
				if renumbered++; renumbered > maxRenumber {
					p.log.Error("resolution not published: the events stream holds other states at every revision tried", "id", ev.ID, "last_tried", next.Revision)
					return nil
				}
				ev = next
				if data, err = schemas.EncodeEvent(ev); err != nil {
					p.log.Error("cannot encode event; dropped", "id", ev.ID, "err", err)
					return nil
				}
				continue
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := b.Next()
		p.log.Warn("publish event; retrying", "id", ev.MsgID(), "err", err, "backoff", wait)
		if retry.Sleep(ctx, wait) != nil {
			return ctx.Err()
		}
	}
}

// maxRenumber bounds how many revisions up a resolution goes looking for a
// free one (afterDuplicate); another processor publishing that many
// revisions of one incident meanwhile is a processor that should not read
// the partition at all.
const maxRenumber = 64

// afterDuplicate decides what follows a publish the events stream took for
// a duplicate of the message at seq: nil when nothing, or the event to
// publish instead.
//
// The stream holds a message under the same Nats-Msg-Id <id>#<revision>:
// this processor's own (an ack lost, the publish retried), or another
// processor's that decided the same incident at the same time (a group
// handing a partition over, a rolling restart: the new owner reads the
// events history before the old one stops). Their states at one revision
// need not agree, and the stream keeps the first. That matters when they
// disagree about the end: a resolution taken for a duplicate of an update
// would leave the incident open on the stream for ever, so it goes out as
// the next revision; and after a resolution on the stream this processor
// publishes nothing more of the incident.
func (p *Processor) afterDuplicate(ctx context.Context, ev *schemas.Event, seq uint64) (*schemas.Event, error) {
	rctx, cancel := requestContext(ctx)
	defer cancel()
	if p.events == nil {
		st, err := p.js.Stream(rctx, schemas.StreamEvents)
		if err != nil {
			return nil, fmt.Errorf("events stream: %w", err)
		}
		p.events = st
	}
	m, err := p.events.GetMsg(rctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil // gone (the stream's age limit): nothing to compare
	}
	if err != nil {
		return nil, fmt.Errorf("events stream message %d (a duplicate of %s): %w", seq, ev.MsgID(), err)
	}
	stored, err := schemas.DecodeEvent(m.Data)
	if err != nil || stored.ID != ev.ID || stored.Revision != ev.Revision {
		p.log.Warn("the events stream's message for a duplicate event is another one", "id", ev.MsgID(), "stream_seq", seq, "err", err)
		return nil, nil
	}
	switch {
	case stored.State == schemas.StateResolved:
		p.published.resolvedOnStream(ev.ID, stored.Revision)
		if ev.State != schemas.StateResolved {
			p.log.Info("incident resolved on the events stream by another processor; not published further", "id", ev.ID, "revision", stored.Revision)
		}
		return nil, nil
	case ev.State != schemas.StateResolved:
		return nil, nil
	}
	next := *ev
	next.Revision++
	p.log.Info("resolution renumbered: the events stream holds another state at its revision", "id", ev.ID, "stored_state", stored.State, "revision", ev.Revision, "published", next.Revision)
	return &next, nil
}

// RequestTimeout bounds each JetStream control request (stream info,
// consumer creation) a processor makes: a reply lost while a cluster node
// dies must fail the request, not hang it for as long as ctx lives.
const RequestTimeout = 10 * time.Second

func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, RequestTimeout)
}

// resolves reports whether this processor ends an incident left open on
// the events stream that its warm-up did not decide again, and why when
// the reason is not that the counters no longer show it. It owns the
// incidents of the ports it reads (port scope) and of the nodes of which
// it reads a port (node scope).
//
// Fabric scope: only a processor that reads every partition runs the
// fabric-wide checks (FabricView.Complete), so it owns them. When the
// partitions are split among processors (a group that grew, or a restart
// with --instances), nobody evaluates them any more, and an incident one
// of them left open would stay open for ever: the processor that reads
// partition 0 ends it, and says why.
func (p *Processor) resolves(s schemas.Subject) (own bool, why string) {
	if s.Node == "" {
		switch {
		case p.fabric.Complete():
			return true, ""
		case p.partIndex[0] >= 0:
			return true, fmt.Sprintf("no processor evaluates the fabric-wide check any more: it runs only on one that reads every partition, and the %d partitions are now split among processors", p.cfg.Partitions)
		}
		return false, ""
	}
	ports := p.fabric.byNode[s.Node]
	if s.Device != "" {
		return find(ports, s.Device, s.Port) != nil, ""
	}
	return len(ports) > 0, ""
}
