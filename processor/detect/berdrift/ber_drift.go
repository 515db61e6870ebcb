// Package berdrift is the ber_drift detector (layer physical): a link
// whose bit error rate trends up towards the level where the FEC or the
// link stops coping (Detector). It registers itself with
// processor.Register; processor/detect/all links it in.
package berdrift

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/stats"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeBERDrift, func() processor.Detector { return New() })
}

// Detector raises ber_drift when a link's bit error rate trends up towards
// the level where the FEC (Ethernet) or the link (InfiniBand) stops coping:
// a dirty connector or a dying optic degrades over tens of minutes to hours,
// and the time to act is before it drops packets.
//
// What it measures, per port, in data time:
//   - Ethernet: pre-FEC BER = rx_corrected_bits_phy over the bits the PHY
//     received (schemas.EthernetPHYBits: rx_bits_phy where the driver lists
//     it, else the link rate x the interval, since a PHY receives symbols at
//     its lane rate whether they carry frames or idles; upstream mlx5 before
//     2026 and MLNX_OFED 5.x do not list rx_bits_phy). The evidence says
//     which (bits_source). rx_err_lane_N_phy names the lane, with a BER per
//     lane over the bits / lanes of the rate text; rx_pcs_symbol_err_phy and
//     rx_symbol_err_phy (symbol errors FEC did not correct) and
//     rx_crc_errors_phy (frames dropped after FEC, a share of
//     rx_packets_phy) give the post-FEC figures. Critical: 1e-6 pre-FEC.
//   - Ethernet without rx_corrected_bits_phy (no PHY statistics group, or
//     FEC off): the same fit on the symbol errors FEC left
//     (rx_symbol_err_phy, else rx_pcs_symbol_err_phy) over the same bits.
//     Critical: 1e-12 post-FEC, where lost frames become steady; each such
//     error is a frame lost already, so CRC errors make it critical.
//   - InfiniBand: symbol BER = symbol_error over the bits the line carried
//     (link rate x time, as ibdiagnet and UFM count it: idles are symbols
//     too; port_rcv_data x 8 when the rate is unknown). Critical: 1e-12.
//     link_error_recovery is reported as support.
//
// How: the port keeps two hours of one-minute buckets (errors and bits, two
// float32 each: ~1 KiB). At every closed minute a cheap check compares the
// last few minutes with the older ones; only when they differ does the
// detector fit a hinge model to the whole window by Poisson maximum
// likelihood: errors_i ~ Poisson(bits_i * exp(a + s*max(0, t_i - onset))),
// i.e. a flat log-BER that starts rising linearly (an exponential BER
// rise) at onset. The fit weighs every minute by how many errors it could
// show, so an idle link (few bits) or a sparse InfiniBand counter (a few
// errors an hour) gets wide bounds instead of wild point estimates. The
// likelihood ratio against a constant BER is scaled by the overdispersion
// of the busy minutes (real BER wanders more than Poisson: quasi-Poisson),
// so a noisy but stable link is not "significant" just because it counts
// millions of bits.
//
// A drift is held when, all at once: the ratio is significant (MinLR), the
// fitted BER has risen MinRise times (MinRiseBusy on continuous counters)
// above the link's own baseline and the
// recent minutes confirm it (median of the last minutes on busy counters,
// a Poisson lower bound on sparse ones), the rise spreads over several
// minutes and errors (not one burst), and the projection reaches the
// critical level within Horizon. A high but stable BER fits the constant
// model: no drift. A pinned symbol_error (65535) is blindness, not zero
// errors: those minutes are left out and an open incident says so.
//
// One incident per drift: it opens after OpenAfterEvaluations minutes in a
// row, updates as the projection moves (severity turns critical when the
// projected time to critical is under CriticalLead or the level is
// crossed), and resolves once the BER of the last ResolveAfter has been
// back below the level the alert was raised at (and near the baseline) for
// ResolveAfter: an optic replaced, or a reset showing a healthy link.
type Detector struct {
	RecentMinutes        int           // the "now" of the cheap check and of the confirmation; default 5
	MinHistoryMinutes    int           // minutes of the link's own history before an onset; default 8
	MinLR                float64       // scaled likelihood ratio (hinge vs constant); default 25
	MinRise              float64       // fitted BER now / baseline; default 2
	MinRiseBusy          float64       // at most this on continuous counters (pre-FEC), scaled by the distance to critical; default 4
	MinErrors            float64       // errors after the onset; default 5
	MinErrorMinutes      int           // minutes with errors after the onset; default 3
	SparseMinutes        int           // the window of the sparse-error test; default 10
	Horizon              time.Duration // projected time to critical must be shorter; default 3 h
	CriticalLead         time.Duration // severity turns critical under this; default 15 min
	OpenAfterEvaluations int           // consecutive minutes holding before open; default 2
	ResolveAfter         time.Duration // default 15 min
	MinUpdateInterval    time.Duration // default 5 min
	SilentResolveAfter   time.Duration // default 30 min

	tracker *processor.Tracker
	fabric  processor.FabricView
}

// New returns the detector with its defaults.
func New() *Detector {
	return &Detector{
		RecentMinutes:        5,
		MinHistoryMinutes:    8,
		MinLR:                25,
		MinRise:              2,
		MinRiseBusy:          4,
		MinErrors:            5,
		MinErrorMinutes:      3,
		SparseMinutes:        10,
		Horizon:              3 * time.Hour,
		CriticalLead:         15 * time.Minute,
		OpenAfterEvaluations: 2,
		ResolveAfter:         15 * time.Minute,
		MinUpdateInterval:    5 * time.Minute,
		SilentResolveAfter:   30 * time.Minute,
	}
}

// Thresholds of the statistics that no operator should need to tune: each
// is tied to the model (Poisson counts, one-minute buckets), not to a fleet.
const (
	// resolveAfterEvaluations: clear evaluations in a row (one a minute)
	// before a drift resolves, on top of ResolveAfter's clean window.
	resolveAfterEvaluations = 2
	// decayMaxSteps caps the halvings of the evidence sums after a gap:
	// 0.5^60 is already zero in float32.
	decayMaxSteps = 60
	// minPostOnset is the number of minutes after an onset a slope needs.
	minPostOnset = 3
	// priorErrors is the pseudo half error (Jeffreys-like prior) that
	// keeps a link with no errors so far at a finite baseline; it makes a
	// rise a little smaller, never larger.
	priorErrors = 0.5
	// doubtErrors is the benefit of the doubt a history gets: one error
	// more than it showed.
	doubtErrors = 1
	// The cheap check: the recent minutes show at least risingMinErrors
	// errors, risingRatio times what the history predicts and
	// risingSigmas Poisson deviations above it. Loose on purpose: it
	// only decides whether the fit is worth running.
	risingMinErrors = 3
	risingRatio     = 1.3
	risingSigmas    = 3
	// The onset search: a coarse pass every coarseStep minutes, then
	// every minute within refineReach of the best coarse onset.
	coarseStep  = 3
	refineReach = 2
	// pearsonMinMean: Pearson residuals are near normal from an expected
	// count of 5; below, a minute says little about overdispersion.
	pearsonMinMean = 5
	// neighbourMinutes: two buckets closer than this are neighbours for
	// the lag-1 autocorrelation (a missing minute breaks the chain).
	neighbourMinutes = 1.5
	// minDispersionMinutes: busy minutes needed to estimate dispersion.
	minDispersionMinutes = 5
	// fitParams: parameters of the hinge model (level, slope, onset),
	// the degrees of freedom the Pearson sum loses.
	fitParams = 3
	// maxAutocorrelation caps rho: (1+rho)/(1-rho) is 19 at 0.9, so a
	// strongly autocorrelated link still weighs like a few minutes, not none.
	maxAutocorrelation = 0.9
	// busyErrors: a minute with this many errors (expected at baseline
	// for the busy test) has a per-minute BER that Poisson noise does not
	// dominate (about +-22%).
	busyErrors = 20
	// recentMedianMinutes: the minutes whose median BER must confirm a
	// rise on a busy counter.
	recentMedianMinutes = 3
	// wanderSigmas: the rise must clear exp(4 sigma) of the link's own
	// wander of ln BER before the onset.
	wanderSigmas = 4
	// minWanderMinutes: busy minutes needed before the wander counts.
	minWanderMinutes = 8
	// busyRiseExponent: a busy counter must rise by (critical/base)^0.35,
	// 0.35 of its distance to critical in decades (see fit).
	busyRiseExponent = 0.35
	// sparseMaxP: the sparse test's significance, strict because it
	// runs every minute on every port.
	sparseMaxP = 1e-5
	// burstMaxP: the one-burst test only has to rule out that the worst
	// bucket made the rise: looser than sparseMaxP.
	burstMaxP = 1e-3
	// The still-rising test: a Theil-Sen slope over the latest
	// trendMaxMinutes busy minutes (at least trendMinMinutes) must keep
	// a third (1/trendKeepDivisor) of the fitted slope.
	trendMaxMinutes  = 20
	trendMinMinutes  = 4
	trendKeepDivisor = 3
	// clear: no more errors than clearBaselineFactor times what the
	// baseline explains, plus clearSigmas Poisson deviations and
	// clearStrayErrors stray error (a sparse counter's one odd error).
	clearBaselineFactor = 1.5
	clearSigmas         = 2
	clearStrayErrors    = 1
	// minSlope keeps the doubling time finite in the evidence.
	minSlope = 1e-9
	// postFECMinErrors: post-FEC errors before a post-FEC BER over
	// schemas.CriticalPostFECBER makes the drift critical (fewer are noise).
	postFECMinErrors = 3
)

// Name implements processor.Detector.
func (d *Detector) Name() string { return schemas.TypeBERDrift }

// Init implements processor.Initializer.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *Detector) track() *processor.Tracker {
	if d.tracker == nil {
		d.tracker = processor.NewTracker(schemas.TypeBERDrift, processor.Policy{
			OpenAfterSamples:    d.OpenAfterEvaluations,
			ResolveAfter:        d.ResolveAfter,
			ResolveAfterSamples: resolveAfterEvaluations,
			MinUpdateInterval:   d.MinUpdateInterval,
			SilentResolveAfter:  d.SilentResolveAfter,
		})
	}
	return d.tracker
}

const (
	buckets  = 120    // two hours of history
	bucketMs = 60_000 // one minute
)

// Bucket flags.
const (
	bucketData    uint8 = 1 << iota // bits were counted in the minute
	bucketBlind                     // symbol_error was pinned: errors invisible
	bucketRetrain                   // link_error_recovery (IB) or link_down_events_phy (Ethernet) rose: the errors are the retrain's
)

// seriesMode is what an Ethernet port's series counts.
type seriesMode uint8

const (
	modeNone    seriesMode = iota // not yet known, or InfiniBand
	modePreFEC                    // rx_corrected_bits_phy: bits FEC corrected
	modePostFEC                   // rx_symbol_err_phy: symbol errors FEC left
)

// portState is the per-port state: ~1.2 KiB whatever the interval.
type portState struct {
	minute int64 // minute number (data time / 1 min) of the newest bucket
	errs   [buckets]float32
	bits   [buckets]float32
	flags  [buckets]uint8

	rateText string
	rateGbps float64

	// Decayed (halved every minute) sums for the evidence: which lane, and
	// the post-FEC error rate of the last few minutes, over the PHY bits
	// and the seconds they cover.
	lanes      [8]float32
	pcsErrs    float32
	symErrs    float32 // rx_symbol_err_phy
	crcErrs    float32 // rx_crc_errors_phy
	rxPackets  float32 // rx_packets_phy
	phyBits    float32 // schemas.EthernetPHYBits
	phySecs    float32
	havePCS    bool
	haveSym    bool
	haveCRC    bool
	mode       seriesMode      // Ethernet: what the series counts
	bitsSrc    schemas.PHYBits // Ethernet: the latest denominator
	recoveries uint64          // link_error_recovery increases seen on the port
	symbolRaw  uint64          // latest symbol_error reading
	blind      bool            // the latest symbol_error reading is pinned

	// Figures of the open incident, fixed when it opens: the baseline and
	// the onset are what the link was before the fault, so refitting them
	// on a window the fault fills more every minute would let the
	// baseline learn from the fault (3e-9 creeping to 1e-7) and the onset
	// wander. crossMin is the observed crossing of the critical level
	// (minutes since the epoch, 0: not yet); once set it never moves.
	baseBER, openBER float64
	onsetMin         float64
	crossMin         float64
	fixed            bool
	recoveriesAtOpen uint64
	lastFit          fitResult
}

// OnSample implements processor.PortDetector.
func (d *Detector) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	ib := s.LinkLayer == "InfiniBand"
	var errs, bits float64
	ok, blind := false, false
	st, have := processor.LookupPortLocal[portState](port, schemas.TypeBERDrift)
	var mode seriesMode
	var src schemas.PHYBits
	if ib {
		errs, bits, ok, blind = d.readIB(st, s)
	} else {
		errs, bits, ok, mode, src = readEthernet(s)
	}
	if !have {
		if !ok && !blind {
			return // nothing readable yet: keep no state
		}
		st = processor.PortLocal[portState](port, schemas.TypeBERDrift)
		st.minute = int64(s.Time) / bucketMs
	}
	retrain := false
	if ib {
		retrain = d.readIBExtras(st, s)
	} else {
		if mode != modeNone && mode != st.mode {
			// The series changes what it counts (a driver that starts
			// listing rx_corrected_bits_phy): the old minutes are not
			// comparable with the new ones.
			if st.mode != modeNone {
				st.errs, st.bits, st.flags = [buckets]float32{}, [buckets]float32{}, [buckets]uint8{}
			}
			st.mode = mode
		}
		if src != schemas.PHYBitsNone {
			st.bitsSrc = src
		}
		retrain = st.readEthernetExtras(s, bits)
	}
	st.blind = blind

	minute := int64(s.Time) / bucketMs
	if minute > st.minute {
		st.advance(minute)
		d.evaluate(port, st, s, minute, em)
	}
	i := int(minute % buckets)
	switch {
	case blind:
		st.flags[i] |= bucketBlind
	case ok:
		st.errs[i] += float32(errs)
		st.bits[i] += float32(bits)
		st.flags[i] |= bucketData
	}
	if retrain {
		// A retrain dumps its symbol errors around the recovery; the two
		// counters are not read atomically, so the errors may sit in the
		// reading before. Both minutes leave the series.
		st.flags[i] |= bucketRetrain
		if prev := int64(port.LastTime) / bucketMs; port.Samples > 0 && prev < minute && prev > minute-buckets {
			st.flags[int(prev%buckets)] |= bucketRetrain
		}
	}
	if blind && d.track().IsOpen(s.ID.Subject()) && st.lastFit.valid {
		// Cannot see errors: hold the incident as it is (no resolve on a
		// blind counter) and say so once.
		d.track().Hold(s.Time, d.finding(port, st, s, st.lastFit), em)
	}
}

// advance clears the buckets of the minutes after st.minute up to minute,
// decays the evidence sums, and makes minute the newest.
func (st *portState) advance(minute int64) {
	steps := minute - st.minute
	for m := st.minute + 1; m <= minute && m <= st.minute+buckets; m++ {
		i := int(m % buckets)
		st.errs[i], st.bits[i], st.flags[i] = 0, 0, 0
	}
	decay := float32(math.Pow(0.5, float64(min(steps, decayMaxSteps))))
	for i := range st.lanes {
		st.lanes[i] *= decay
	}
	st.pcsErrs *= decay
	st.symErrs *= decay
	st.crcErrs *= decay
	st.rxPackets *= decay
	st.phyBits *= decay
	st.phySecs *= decay
	st.minute = minute
}

// usable reports whether a counter's delta can be used: a baseline carries
// none, a held glitch is a 0 that is not a reading.
func usable(c schemas.CounterDelta) bool {
	return c.Flags&(schemas.FlagFirst|schemas.FlagHeld) == 0
}

// readEthernet returns the sample's errors of the series and the bits
// the PHY received (schemas.EthernetPHYBits, src says which). The series
// is rx_corrected_bits_phy (pre-FEC) where the port lists it, else the
// symbol errors FEC left (rx_symbol_err_phy, else rx_pcs_symbol_err_phy).
// Over the line rate a reset error counter counts from an unknown moment
// of the interval, so it is left out; rx_bits_phy resets with it.
func readEthernet(s *processor.Sample) (errs, bits float64, ok bool, mode seriesMode, src schemas.PHYBits) {
	c, have := s.CounterByID(idRxCorrectedBitsPhy)
	mode = modePreFEC
	if !have {
		mode = modePostFEC
		if c, have = s.CounterByID(idRxSymbolErrPhy); !have {
			c, have = s.CounterByID(idRxPCSSymbolErrPhy)
		}
	}
	if !have {
		return 0, 0, false, modeNone, schemas.PHYBitsNone
	}
	bits, src = schemas.EthernetPHYBits(s.PortSample)
	if !usable(c) || src == schemas.PHYBitsNone || src == schemas.PHYBitsLineRate && c.Flags&schemas.FlagReset != 0 {
		return 0, 0, false, mode, src
	}
	return float64(c.Delta), bits, bits > 0, mode, src
}

// readEthernetExtras keeps the decayed sums of the evidence (lanes,
// post-FEC errors, the PHY bits) and reports whether the link went down in
// this reading (link_down_events_phy): the errors around a retrain are the
// retrain's, not the drift's.
func (st *portState) readEthernetExtras(s *processor.Sample, bits float64) (retrain bool) {
	if c, ok := s.CounterByID(idRxPCSSymbolErrPhy); ok && usable(c) {
		st.pcsErrs += float32(c.Delta)
		st.havePCS = true
	}
	if c, ok := s.CounterByID(idRxSymbolErrPhy); ok && usable(c) {
		st.symErrs += float32(c.Delta)
		st.haveSym = true
	}
	if c, ok := s.CounterByID(idRxCRCErrorsPhy); ok && usable(c) {
		st.crcErrs += float32(c.Delta)
		st.haveCRC = true
	}
	if c, ok := s.CounterByID(idRxPacketsPhy); ok && usable(c) {
		st.rxPackets += float32(c.Delta)
	}
	if bits > 0 {
		st.phyBits += float32(bits)
		st.phySecs += float32(s.IntervalMs) / 1000
	}
	for lane, id := range idRxErrLanePhy {
		if c, ok := s.CounterByID(id); ok && usable(c) {
			st.lanes[lane] += float32(c.Delta)
		}
	}
	if c, ok := s.CounterByID(idLinkDownEventsPhy); ok && usable(c) && c.Flags&schemas.FlagReset == 0 {
		retrain = c.Delta > 0
	}
	if st.rateText != s.Rate {
		st.rateText, st.rateGbps = s.Rate, rateGbps(s.Rate)
	}
	return retrain
}

// readIB returns the sample's symbol errors and line bits; blind is set
// when symbol_error is pinned at 65535 and cannot count.
func (d *Detector) readIB(st *portState, s *processor.Sample) (errs, bits float64, ok, blind bool) {
	var haveErrs bool
	if c, found := s.CounterByID(idSymbolError); found {
		if c.Flags&schemas.FlagHeld != 0 {
			return 0, 0, false, false
		}
		if c.Flags&schemas.FlagSaturated != 0 || c.Value >= symbolErrorMax {
			return 0, 0, false, true
		}
		if c.Flags&schemas.FlagFirst != 0 {
			return 0, 0, false, false
		}
		errs, haveErrs = float64(c.Delta), true
	}
	if !haveErrs || s.IntervalMs <= 0 || !schemas.LinkActive(s.PortSample.State) {
		return 0, 0, false, false
	}
	var rcvBytes float64
	haveRcv := false
	if c, found := s.CounterByID(idPortRcvData); found && usable(c) && c.Flags&schemas.FlagSaturated == 0 {
		// A pinned 32-bit port_rcv_data counts nothing: no bits.
		rcvBytes, haveRcv = float64(c.Delta), true
	}
	rate := 0.0
	if st != nil && st.rateText == s.Rate {
		rate = st.rateGbps
	} else {
		rate = rateGbps(s.Rate)
	}
	switch {
	case rate > 0:
		bits = schemas.LineBits(rate, s.IntervalMs, 0)
	case haveRcv:
		bits = schemas.LineBits(0, s.IntervalMs, rcvBytes) // deltas of port_rcv_data are bytes already
	}
	return errs, bits, bits > 0, false
}

// readIBExtras keeps the rate text, the recoveries and the raw
// symbol_error; it reports whether the link retrained in this reading.
func (d *Detector) readIBExtras(st *portState, s *processor.Sample) (retrain bool) {
	if st.rateText != s.Rate {
		st.rateText, st.rateGbps = s.Rate, rateGbps(s.Rate)
	}
	if c, ok := s.CounterByID(idLinkErrorRecovery); ok && usable(c) {
		st.recoveries += c.Delta
		retrain = c.Delta > 0
	}
	if c, ok := s.CounterByID(idSymbolError); ok && c.Flags&schemas.FlagHeld == 0 {
		st.symbolRaw = c.Value
	}
	return retrain
}

// fitResult is the result of one evaluation.
type fitResult struct {
	valid bool
	// onsetMin, nowMin are in minutes since the epoch (data time).
	onsetMin, nowMin float64
	slopePerMin      float64 // of ln BER
	baseBER          float64 // fitted level before the onset
	nowBER           float64 // fitted level now
	lr               float64 // likelihood ratio / dispersion
	dispersion       float64
	postErrors       float64
	postErrMinutes   int
	// Empirical BER of the recent minutes with ~95% Poisson bounds.
	recentBER, recentLow, recentHigh float64
	recentErrors, recentBits         float64
	recentMedian                     float64 // median per-minute BER (busy counters)
	busy                             bool    // enough errors per minute for per-minute figures
	minutesToCritical                float64
	critical                         float64
	minRise                          float64 // the rise this link needs (MinRise or its own wander)
	sparseErrors, sparseExpected     float64 // the sparse test's figures
	test                             string  // which test held: trend or sparse
	holds                            bool
	why                              string // why it does not hold, for tests

	// The projection (project): the model over the minutes since the
	// onset, the slope of ln BER now, the e-folding time of that slope
	// (accelerating model only), the scaled likelihood ratio of
	// acceleration, and the observed crossing (0: not crossed).
	projected   bool
	accel       bool
	projSlope   float64
	accelTauMin float64
	accelLR     float64
	crossMin    float64
	// aheadSE is the standard error of the time to critical (minutes,
	// stats.AccelResult.ReachSD); +Inf when unknown. aheadHalf is the
	// half-width the projection is published with (see projRelErr),
	// and confident whether it is within projRelErr of the time left.
	aheadSE, aheadHalf float64
	confident          bool
}

// series is the window as the fit reads it, oldest first.
type series struct {
	n    int
	t    [buckets]float64 // bucket centre, minutes since the epoch
	k, b [buckets]float64
}

// view is the series as processor/stats reads it: the buckets in use.
func (ser *series) view() stats.Series {
	return stats.Series{T: ser.t[:ser.n], K: ser.k[:ser.n], B: ser.b[:ser.n]}
}

func (st *portState) series(newest int64, intervalMs int64) *series {
	var ser series
	// A sample's deltas cover the interval before its time, so a bucket's
	// data sits half an interval before the bucket's centre.
	shift := 0.5 - float64(intervalMs)/2/bucketMs
	for m := newest - buckets + 1; m <= newest; m++ {
		if m < 0 {
			continue
		}
		i := int(m % buckets)
		if st.flags[i]&bucketData == 0 || st.flags[i]&(bucketBlind|bucketRetrain) != 0 || st.bits[i] <= 0 {
			continue
		}
		ser.t[ser.n] = float64(m) + shift
		ser.k[ser.n] = float64(st.errs[i])
		ser.b[ser.n] = float64(st.bits[i])
		ser.n++
	}
	return &ser
}

// evaluate runs once per closed minute: the cheap check, the fit when
// worth it, and the incident lifecycle.
func (d *Detector) evaluate(port *processor.PortState, st *portState, s *processor.Sample, minute int64, em processor.Emitter) {
	t := d.track()
	subject := s.ID.Subject()
	open := t.IsOpen(subject)
	pending := t.Active() > 0 && !open && t.Pending(subject)
	ser := st.series(minute-1, port.LastIntervalMs)
	critical := schemas.CriticalPreFECBER
	switch {
	case s.LinkLayer == "InfiniBand":
		critical = schemas.CriticalSymbolBER
	case st.mode == modePostFEC:
		critical = schemas.CriticalPostFECBER
	}
	if !open && !pending && !d.rising(ser) {
		return
	}
	fit := d.fit(ser, critical)
	if fit.valid {
		st.lastFit = fit
	}
	now := s.Time
	switch {
	case !open:
		st.fixed, st.crossMin = false, 0
		if fit.holds {
			fit = d.project(st, ser, fit)
			t.Hold(now, d.finding(port, st, s, fit), em)
			if t.IsOpen(subject) {
				st.baseBER, st.openBER, st.recoveriesAtOpen = fit.baseBER, fit.nowBER, st.recoveries
				st.onsetMin, st.crossMin, st.fixed = fit.onsetMin, fit.crossMin, true
				st.lastFit = fit
			}
		} else {
			t.Clear(now, subject, "", nil, em)
		}
	case st.blind:
		// Cannot see: neither confirm nor clear.
	default:
		if d.clear(st, ser) {
			why := fmt.Sprintf("the BER has been back near its baseline (%.3g) for %s", st.baseBER, d.ResolveAfter)
			t.Clear(now, subject, why, map[string]any{"recent_ber": processor.Finite(fit.recentBER)}, em)
			return
		}
		if !fit.valid {
			fit = st.lastFit
			fit.recentBER, fit.recentLow, fit.recentHigh = ser.recentBER(d.RecentMinutes)
		}
		if !st.fixed {
			// Resumed after a restart: what the first evaluation sees is
			// the incident's from now on.
			st.baseBER, st.onsetMin, st.fixed = fit.baseBER, fit.onsetMin, true
		}
		fit = d.project(st, ser, fit)
		st.crossMin = fit.crossMin
		st.lastFit = fit
		t.Hold(now, d.finding(port, st, s, fit), em)
	}
}

// The projection's model. The hinge (a straight line in ln BER after the
// onset) is what decides a drift; it is also what projected the crossing
// until it proved late on failing optics: their BER rises faster and
// faster (the doubling time shrinks), and a straight line fitted to the
// whole rise averages the old slow minutes with the new fast ones. On
// test ramps ln BER = a + b(e^{t/tau} - 1) it announced 59-74 % of the
// time left too late. The projection now fits, by Poisson maximum
// likelihood over the minutes since the onset,
//
//	ln BER(t) = c + s (e^{r (t - now)} - 1) / r
//
// (s the slope now, 1/r the e-folding time of the slope; r = 0 is the
// straight line), and keeps the acceleration only when it beats the
// straight line by accelMinLR (likelihood ratio over the quasi-Poisson
// dispersion, with the AR(1) factor of a slow wander): a log-linear ramp is
// not projected early because noise bent it. A power-law rise (ln BER
// growing as t^1.2..t^2, altgen's shapes) sits between the two, and the
// exponential slope extrapolates it to within a few percent. Measured by
// TestBERDriftProjection (every revision at least 2 minutes before the
// crossing, 1/5/10 s intervals, Ethernet with and without rx_bits_phy,
// InfiniBand): see its log for the errors.
const (
	// accelMinLR: chi-square(1) 4 is p ~ 0.05, AIC's penalty for one
	// parameter is 2; 4 keeps noise from bending log-linear ramps.
	accelMinLR = 4
	// The slope's e-folding time is searched between these (minutes):
	// under 3 minutes is a step, not a ramp; over 8 hours is a line.
	accelTauMin = 3
	accelTauMax = 480
	// A time to critical is published only when its 90% interval
	// (projZ standard errors, and every slope growth rate the data do
	// not rule out) is within projRelErr of the time left: a projection from a
	// handful of errors (an InfiniBand link's symbol errors before the
	// crossing) is otherwise off by tens of percent, and a wrong time in
	// a page is worse than "not yet known".
	projZ      = 1.645
	projRelErr = 0.2
	// profileDrop: the rates R whose profile log-likelihood is within
	// one chi-square(1) unit of the best (one standard error) spread the
	// projection; 90% (2.7) withheld half the accurate projections of
	// noisy log-linear ramps in TestBERDriftProjection.
	profileDrop = 1
	// accelMaybeLR and accelSureLR: below 2 (p ~ 0.16) the data do
	// not favour acceleration at all; from 10.8 (p = 0.001) they settle it.
	// Between them the distance between the two models' crossings is part
	// of the uncertainty.
	accelMaybeLR = 2
	accelSureLR  = 10.8
)

// project fits the projection model over the minutes since the incident's
// onset (fixed at open, the fit's before) and sets the figures the events
// carry: the time to critical, the slope now, errors since the onset. Once
// the measured BER of the recent minutes is past the critical level, the
// crossing is where the model fitted over the minutes around it meets the
// level (an interpolation, not a projection), clamped to the minutes since
// the onset; it is kept on the port and never moves for the incident.
func (d *Detector) project(st *portState, ser *series, f fitResult) fitResult {
	if ser.n == 0 {
		return f
	}
	if st.fixed {
		f.baseBER, f.onsetMin = st.baseBER, st.onsetMin
	}
	f.nowMin = ser.t[ser.n-1] + 0.5
	f.recentMedian = ser.recentMedian(recentMedianMinutes)
	var ts, ks, bs [buckets]float64
	m := 0
	f.postErrors, f.postErrMinutes = 0, 0
	for i := 0; i < ser.n; i++ {
		if ser.t[i] < f.onsetMin {
			continue
		}
		ts[m], ks[m], bs[m] = ser.t[i], ser.k[i], ser.b[i]
		f.postErrors += ser.k[i]
		if ser.k[i] > 0 {
			f.postErrMinutes++
		}
		m++
	}
	level := math.Log(f.critical)
	res := stats.AccelFit(ts[:m], ks[:m], bs[:m], f.nowMin, accelTauMin, accelTauMax)
	ahead := math.Inf(1)
	f.aheadSE = math.Inf(1)
	if res.OK {
		f.projected = true
		f.accelLR = res.LR()
		f.accel = res.R > 0 && f.accelLR >= accelMinLR
		ahead = res.LinReach(level)
		f.projSlope = res.LinS
		f.nowBER = math.Exp(res.LinC)
		if f.accel {
			ahead = res.Reach(level)
			f.projSlope = res.S
			f.accelTauMin = 1 / res.R
			f.nowBER = math.Exp(res.C)
		}
		switch {
		case ahead <= 0:
			f.minutesToCritical = 0
		case !math.IsInf(ahead, 1):
			f.minutesToCritical = ahead
		}
		f.aheadSE = res.ReachSD(ts[:m], bs[:m], f.nowMin, level, f.accel)
		// The half-width: 90% of the level and slope's standard error;
		// the spread over the slope growth rates within one standard
		// error on the profile likelihood; and, where neither model is
		// settled, the distance between the two.
		f.aheadHalf = max(projZ*f.aheadSE, res.ReachSpread(level, profileDrop, ahead))
		if lr := f.accelLR; res.R > 0 && lr >= accelMaybeLR && lr < accelSureLR {
			f.aheadHalf = max(f.aheadHalf, math.Abs(res.Reach(level)-res.LinReach(level)))
		}
		f.confident = ahead > 0 && !math.IsInf(ahead, 1) && f.aheadHalf <= projRelErr*ahead
	}
	crossed := f.recentMedian >= f.critical && f.recentBER >= f.critical || f.recentLow >= f.critical
	switch {
	case st.fixed && st.crossMin > 0:
		f.crossMin = st.crossMin
	case crossed:
		at := f.nowMin + ahead
		if !(ahead <= 0) {
			at = f.nowMin // the model lags the minutes: they crossed by now
		}
		f.crossMin = min(f.nowMin, max(at, f.onsetMin, ser.t[0]-0.5))
	}
	if f.crossMin > 0 {
		f.minutesToCritical = 0
	}
	return f
}

// rising is the cheap check: the last RecentMinutes show at least 1.3
// times the BER of the older minutes, beyond Poisson noise, or the last
// SparseMinutes hold MinErrors errors where the history expects fewer.
func (d *Detector) rising(ser *series) bool {
	if ser.n < d.MinHistoryMinutes+minPostOnset {
		return false
	}
	tEnd := ser.t[ser.n-1]
	var kr, br, ks, bs, kh, bh float64
	for i := 0; i < ser.n; i++ {
		switch {
		case ser.t[i] > tEnd-float64(d.RecentMinutes):
			kr += ser.k[i]
			br += ser.b[i]
			fallthrough
		case ser.t[i] > tEnd-float64(d.SparseMinutes):
			ks += ser.k[i]
			bs += ser.b[i]
		default:
			kh += ser.k[i]
			bh += ser.b[i]
		}
	}
	if bh <= 0 {
		return false
	}
	bh += bs - br // the recent test's history starts where its window ends
	kh += ks - kr
	expect := br * (kh + priorErrors) / bh
	if kr >= risingMinErrors && kr >= risingRatio*expect && kr >= expect+risingSigmas*math.Sqrt(expect) {
		return true
	}
	kh -= ks - kr
	bh -= bs - br
	return ks >= d.MinErrors && ks >= d.MinRise*bs*(kh+doubtErrors)/bh
}

// fit finds the hinge model with the highest likelihood and decides.
func (d *Detector) fit(ser *series, critical float64) fitResult {
	f := fitResult{critical: critical, dispersion: 1}
	n := ser.n
	if n < d.MinHistoryMinutes+minPostOnset {
		f.why = "short history"
		return f
	}
	f.recentBER, f.recentLow, f.recentHigh = ser.recentBER(d.RecentMinutes)
	best, ok := d.bestHinge(ser)
	if !ok {
		f.why = "no rise"
		return f
	}

	f.valid = true
	f.onsetMin = best.Tau
	f.nowMin = ser.t[n-1] + 0.5
	f.slopePerMin = best.Slope
	f.baseBER = math.Exp(best.A)
	f.nowBER = math.Exp(best.A + best.Slope*(f.nowMin-best.Tau))
	f.dispersion, f.postErrors, f.postErrMinutes = ser.dispersion(best)
	f.lr = best.LR / f.dispersion
	f.busy = f.baseBER*ser.b[n-1] >= busyErrors
	f.recentMedian = ser.recentMedian(recentMedianMinutes)

	if f.nowBER >= critical {
		f.minutesToCritical = 0
	} else {
		f.minutesToCritical = math.Log(critical/f.nowBER) / best.Slope
	}
	// The rise must clear the link's own wander, not only MinRise: a link
	// whose BER breathes with temperature by 2x is not drifting when it
	// breathes 2x.
	f.minRise = max(d.MinRise, math.Exp(wanderSigmas*ser.wander(best.From)))
	if f.busy && f.baseBER > 0 && f.baseBER < critical {
		// Continuous counters (pre-FEC corrected bits) breathe with
		// temperature and load by 2-3x over tens of minutes, and a link with
		// little history has no wander estimate yet. Ask for more of a rise
		// the further the link is from critical, up to MinRiseBusy: 0.35 of
		// the distance in decades stays ahead of half-way to critical (a
		// 40-minute drift from 5e-9 to 1e-6 passes 4x after about 10
		// minutes; a 2-hour decade from 1e-7 passes 2.2x after 42).
		f.minRise = max(f.minRise, d.busyMinRise(f.baseBER, critical))
	}
	d.decide(ser, best, &f)
	return f
}

// bestHinge searches the onset of the hinge model with the highest
// likelihood; false when no onset gives a rising fit.
func (d *Detector) bestHinge(ser *series) (stats.HingeResult, bool) {
	return ser.view().BestHinge(stats.HingeSearch{
		MinBefore:   d.MinHistoryMinutes,
		MinAfter:    minPostOnset,
		CoarseStep:  coarseStep,
		RefineReach: refineReach,
		// A pseudo half error before the onset keeps the baseline finite on
		// a link that never showed one (Jeffreys-like prior); it makes the
		// rise a little smaller, never larger.
		Prior: priorErrors,
	})
}

// dispersion is the overdispersion of the busy minutes under the fitted
// model (Pearson): quasi-Poisson. Real BER also wanders slowly
// (temperature, load): neighbouring minutes' residuals agree, and n
// correlated minutes weigh like fewer independent ones. The lag-1
// autocorrelation rho of the residuals inflates the dispersion by
// (1+rho)/(1-rho), the AR(1) variance factor of a mean, so a slow wander is
// not read as a significant trend. It also counts the errors, and the
// minutes with errors, after the onset.
func (ser *series) dispersion(best stats.HingeResult) (dispersion, postErrors float64, postErrMinutes int) {
	return ser.view().HingeDispersion(best, stats.DispersionRule{
		MinMean:    pearsonMinMean,
		Neighbour:  neighbourMinutes,
		MinBuckets: minDispersionMinutes,
		Params:     fitParams,
		MaxRho:     maxAutocorrelation,
	})
}

// decide applies the tests of a drift to a valid fit, in order; the first
// that fails is the fit's why.
func (d *Detector) decide(ser *series, best stats.HingeResult, f *fitResult) {
	sparse := !f.busy && d.sparseRise(ser, best.From, f)
	f.test = "trend"
	if sparse && f.lr < d.MinLR {
		f.test = "sparse"
	}
	switch {
	case f.lr < d.MinLR && !sparse:
		f.why = "not significant"
	case f.nowBER < f.minRise*f.baseBER:
		f.why = "rise too small"
	case f.postErrors < d.MinErrors || f.postErrMinutes < d.MinErrorMinutes:
		f.why = "too few errors"
	case f.busy && f.recentMedian < f.minRise*f.baseBER:
		f.why = "recent minutes do not confirm"
	case !f.busy && f.recentLow <= f.baseBER:
		f.why = "recent minutes do not confirm"
	case !f.busy && !ser.beyondOneBurst(best.From, d.MinRise):
		f.why = "one burst"
	case f.busy && !d.stillRising(ser, best):
		f.why = "not rising any more"
	case f.minutesToCritical > d.Horizon.Minutes():
		f.why = "too slow"
	default:
		f.holds = true
	}
}

// busyMinRise is the rise a continuous counter must show: 0.35 of the
// distance to critical in decades, between busyRiseFloor and MinRiseBusy.
func (d *Detector) busyMinRise(baseBER, critical float64) float64 {
	return max(d.MinRise, busyRiseFloor, min(d.MinRiseBusy, math.Pow(critical/baseBER, busyRiseExponent)))
}

// busyRiseFloor: a busy counter near critical (a link already at 2e-7
// pre-FEC) still breathes 2-2.4x; it must rise more than that to be a drift.
const busyRiseFloor = 2.5

// wander is the robust spread (MAD x 1.4826) of the per-minute ln BER
// before the onset, over the busy minutes (at least 20 errors: below that
// Poisson noise, which the fit already weighs, dominates); 0 with fewer
// than 8 such minutes.
func (ser *series) wander(from int) float64 {
	return ser.view().Wander(from, busyErrors, minWanderMinutes)
}

// sparseHistoryMinutes is the history the sparse test needs: a few errors
// an hour need half an hour before "none so far" says anything.
const sparseHistoryMinutes = 30

// sparseRise is the test for counters that show a few errors an hour
// (InfiniBand symbol errors, very clean Ethernet links). It starts at the
// first minute with errors after the fitted onset (errors are what make a
// sparse drift visible; the exponential fit itself puts the onset earlier)
// and asks for at least MinErrors errors over MinErrorMinutes different
// minutes since then, MinRise times what the link's own history before
// predicts, and so many that the history's rate (with one error of benefit
// of the doubt) explains them with probability under 1e-5, not counting
// the error that chose the start. A few errors over a few minutes on a
// clean link is the first sign a drift gives; one burst (a flap, a reseat)
// is not, nor a handful spread over an hour.
func (d *Detector) sparseRise(ser *series, from int, f *fitResult) bool {
	for from < ser.n && ser.k[from] == 0 {
		from++
	}
	var kw, bw, kh, bh float64
	minutes := 0
	if from >= ser.n {
		return false
	}
	for i := 0; i < ser.n; i++ {
		if i >= from {
			kw += ser.k[i]
			bw += ser.b[i]
			if ser.k[i] > 0 {
				minutes++
			}
		} else {
			kh += ser.k[i]
			bh += ser.b[i]
		}
	}
	if bh <= 0 || bw <= 0 || from < sparseHistoryMinutes {
		return false
	}
	expect := bw * (kh + doubtErrors) / bh
	f.sparseErrors, f.sparseExpected = kw, expect
	return kw >= d.MinErrors && minutes >= d.MinErrorMinutes && kw >= d.MinRise*expect &&
		stats.RateTest(kw-1, bw, kh, bh) < sparseMaxP
}

// beyondOneBurst is the burst test of sparse counters: the rise since
// the onset must still stand without its single worst bucket. A link
// retrain, a reseat or a flap dumps tens of symbol errors into one interval
// (and a node gap folds minutes of them into one reading); a drift spreads
// its errors over the minutes. With the worst bucket left out (its errors
// and its bits), the rest must still exceed the history's rate MinRise
// times and be unlikely under it (P < 1e-3: a looser bound than the main
// test's, it only has to rule out that one burst made the rise).
func (ser *series) beyondOneBurst(from int, minRise float64) bool {
	return ser.view().BeyondOneBurst(from, minRise, doubtErrors, burstMaxP)
}

// stillRising checks, on busy counters, that the latest minutes keep the
// trend (Theil-Sen slope of ln BER over the post-onset minutes at least a
// third of the fit's): a step up that then stays flat is a high BER, not a
// drift, and one burst is neither.
func (d *Detector) stillRising(ser *series, h stats.HingeResult) bool {
	slope, ok := ser.view().RecentTrend(h.From, busyErrors, trendMinMinutes, trendMaxMinutes)
	if !ok {
		return true // too few busy minutes to judge: the fit decides
	}
	return slope >= h.Slope/trendKeepDivisor
}

// recentBER is the BER of the last minutes with ~95% Poisson bounds.
func (ser *series) recentBER(minutes int) (ber, low, high float64) {
	return ser.view().RecentRate(minutes)
}

// recentMedian is the median per-minute BER of the last minutes of the
// series (8 at most).
func (ser *series) recentMedian(minutes int) float64 {
	return ser.view().RecentMedian(minutes)
}

// clear reports whether the last ResolveAfter shows the BER back near the
// baseline the drift rose from: no more errors than 1.5 times the baseline
// explains, with Poisson slack (on a sparse counter: one stray error). The
// level the alert was raised at is not enough: a slow drift under a
// wandering BER dips below it and would resolve and reopen (a fragment).
func (d *Detector) clear(st *portState, ser *series) bool {
	if ser.n == 0 {
		return false
	}
	minutes := max(1, int(d.ResolveAfter/time.Minute))
	var k, b float64
	covered := 0
	tEnd := ser.t[ser.n-1]
	for i := ser.n - 1; i >= 0 && ser.t[i] > tEnd-float64(minutes); i-- {
		k += ser.k[i]
		b += ser.b[i]
		covered++
	}
	if covered < max(1, minutes/2) {
		return false
	}
	expect := clearBaselineFactor * st.baseBER * b
	return k <= expect+clearSigmas*math.Sqrt(expect)+clearStrayErrors
}

// sig4 rounds to 4 significant digits: the evidence is for people.
func sig4(v float64) float64 { return processor.SigDigits(v, 4) }

// roundBER rounds a BER to 3 significant digits through its decimal form,
// so the JSON reads 2.49e-07 and never 2.4899999999999998e-07.
func roundBER(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(processor.Finite(v), 'g', 3, 64), 64)
	if err != nil {
		return 0
	}
	return r
}

// toSecond rounds a time to the second: a projection is not known to the
// millisecond, and a person reads seconds.
func toSecond(ms schemas.Millis) schemas.Millis { return (ms + 500) / 1000 * 1000 }

func minuteMillis(m float64) schemas.Millis { return schemas.Millis(math.Round(m * bucketMs)) }

// finding is the event a drift opens or updates: severity, evidence,
// summary and checks from the fit.
func (d *Detector) finding(port *processor.PortState, st *portState, s *processor.Sample, f fitResult) processor.Finding {
	ib := s.LinkLayer == "InfiniBand"
	what, measure := st.measureWords(ib)
	severity := schemas.SeverityWarning
	crossed := f.crossMin > 0
	if crossed || f.minutesToCritical <= d.CriticalLead.Minutes() {
		severity = schemas.SeverityCritical
	}
	if crossed {
		f.minutesToCritical = 0
	}
	fc := driftFacts{f: f, what: what, measure: measure, crossed: crossed}
	fc.onset, fc.criticalAt = findingTimes(port, s, f, crossed)
	fc.slope, fc.model = projectionModel(f)
	fc.withheld = !crossed && !f.confident
	ev := d.evidence(st, fc)
	keys, postFECCritical := st.linkEvidence(ev, ib)
	if postFECCritical {
		severity = schemas.SeverityCritical
	}
	return processor.Finding{
		Subject:  s.ID.Subject(),
		Onset:    fc.onset,
		Severity: severity,
		Layer:    schemas.LayerPhysical,
		Summary:  st.summary(processor.PortName(s.ID, s.Netdev), fc, ib),
		Evidence: ev,
		Checks:   d.checks(s, ib),
		Keys:     keys,
		Progress: true,
	}
}

// driftFacts is what a finding states about one fit, worked out once so
// that the evidence and the summary quote the same onset, crossing time,
// slope and model.
type driftFacts struct {
	f                 fitResult // minutesToCritical is 0 once the critical BER is crossed
	what, measure     string
	crossed, withheld bool
	onset, criticalAt schemas.Millis
	slope             float64
	model             string
}

// measureWords names the BER a finding speaks of (what) and the counters
// it is measured from (measure): pre-FEC, post-FEC or InfiniBand symbol BER.
func (st *portState) measureWords(ib bool) (what, measure string) {
	what, measure = "pre-FEC BER", "rx_corrected_bits_phy / "+bitsWords(st.bitsSrc)
	if !ib && st.mode == modePostFEC {
		what, measure = "post-FEC symbol BER", postFECCounter(st)+" / "+bitsWords(st.bitsSrc)
	}
	if ib {
		what, measure = "symbol BER", "symbol_error / line bits (rate x time)"
		if st.rateGbps <= 0 {
			measure = "symbol_error / (port_rcv_data x 8)"
		}
	}
	return what, measure
}

// findingTimes are the onset, to the second and kept within the port's
// data, and the critical time: the observed crossing once crossed, the
// projection from now before.
func findingTimes(port *processor.PortState, s *processor.Sample, f fitResult, crossed bool) (onset, criticalAt schemas.Millis) {
	onset = toSecond(minuteMillis(f.onsetMin))
	nowMs := minuteMillis(f.nowMin)
	onset = min(max(onset, port.FirstTime), s.Time)
	criticalAt = toSecond(nowMs + minuteMillis(f.minutesToCritical))
	if crossed {
		criticalAt = toSecond(minuteMillis(f.crossMin))
	}
	return onset, criticalAt
}

// projectionModel is the slope the projection used and the model's name:
// the projection's own slope once it was fitted, the hinge's before.
func projectionModel(f fitResult) (slope float64, model string) {
	slope = f.slopePerMin
	model = "log-linear"
	if f.projected {
		slope = f.projSlope
		if f.accel {
			model = "accelerating"
		}
	}
	return slope, model
}

// evidence is the finding's evidence on the drift itself; linkEvidence
// adds the link layer's figures.
func (d *Detector) evidence(st *portState, fc driftFacts) map[string]any {
	f, slope := fc.f, fc.slope
	ev := map[string]any{
		"measure":               fc.measure,
		"critical_ber":          f.critical,
		"baseline_ber":          roundBER(f.baseBER),
		"current_ber":           roundBER(f.nowBER),
		"recent_ber":            roundBER(f.recentBER),
		"recent_ber_low":        roundBER(f.recentLow),
		"recent_ber_high":       roundBER(f.recentHigh),
		"recent_minutes":        d.RecentMinutes,
		"slope_decades_per_h":   sig4(slope * 60 / math.Ln10),
		"doubling_minutes":      sig4(math.Ln2 / max(slope, minSlope)),
		"minutes_to_critical":   sig4(f.minutesToCritical),
		"projected_critical_at": fc.criticalAt.String(),
		"projection_model":      fc.model,
		"critical_crossed":      fc.crossed,
		"onset_estimate":        fc.onset.String(),
		"likelihood_ratio":      sig4(f.lr),
		"dispersion":            sig4(f.dispersion),
		"errors_since_onset":    math.Round(processor.Finite(f.postErrors)),
		"window_minutes":        buckets,
		"blind":                 st.blind,
		"test":                  f.test,
	}
	if f.projected {
		// Whether the rise accelerates (the model is chosen on it) and,
		// when it does, the slope's own e-folding time: how fast the
		// doubling time shrinks.
		ev["acceleration_lr"] = sig4(f.accelLR)
		if f.accel {
			ev["slope_efold_minutes"] = sig4(f.accelTauMin)
		}
	}
	if !fc.crossed && !math.IsInf(f.aheadSE, 0) {
		ev["minutes_to_critical_se"] = sig4(f.aheadSE)
	}
	if fc.withheld {
		// Not known to projRelErr: no time is published (see
		// projZ), the reason is.
		delete(ev, "projected_critical_at")
		delete(ev, "minutes_to_critical")
		ev["projection_withheld"] = withheldWhy(f)
	}
	if fc.crossed {
		// The observed crossing: projected_critical_at is it from now on.
		ev["critical_crossed_at"] = fc.criticalAt.String()
	}
	return ev
}

// linkEvidence adds the link layer's figures to the evidence: InfiniBand's
// symbol and recovery counters (and the blind key while symbol_error is
// pinned), or Ethernet's lanes and post-FEC figures, and the post-FEC-only
// note. postFECCritical as ethernetEvidence says.
func (st *portState) linkEvidence(ev map[string]any, ib bool) (keys []string, postFECCritical bool) {
	if ib {
		ev["symbol_error"] = st.symbolRaw
		ev["link_error_recovery_since_open"] = st.recoveries - min(st.recoveries, st.recoveriesAtOpen)
		if st.blind {
			ev["blind_reason"] = "symbol_error is pinned at 65535: new symbol errors are invisible until the counters are cleared"
			keys = append(keys, "blind")
		}
	} else if st.ethernetEvidence(ev) {
		postFECCritical = true
	}
	if !ib && st.mode == modePostFEC {
		ev["post_fec_only"] = true
		ev["post_fec_only_note"] = "no rx_corrected_bits_phy on this port: the series is the symbol errors FEC did not correct (or a link without FEC); each one costs a frame, the cliff is behind"
	}
	return keys, postFECCritical
}

// summary is the finding's one line: crossed, drifting with its time to
// the critical BER withheld, or drifting with that time, and the caveats
// of a blind or post-FEC-only series.
func (st *portState) summary(where string, fc driftFacts, ib bool) string {
	f, slope, what, onset := fc.f, fc.slope, fc.what, fc.onset
	var summary string
	if fc.crossed {
		summary = fmt.Sprintf("%s: %s rose from %.2g to %.2g since %s and crossed the critical %.0e at %s", where, what, f.baseBER, f.nowBER, onset, f.critical, fc.criticalAt.Time().Format("15:04:05"))
	} else if fc.withheld {
		summary = fmt.Sprintf("%s: %s is drifting up (%.2g to %.2g since %s, x2 every %.0f min); the time to the critical %.0e is not yet known to %.0f%% (%s)",
			where, what, f.baseBER, f.nowBER, onset, math.Ln2/max(slope, minSlope), f.critical, 100*projRelErr, withheldWhy(f))
	} else {
		summary = fmt.Sprintf("%s: %s is drifting up (%.2g to %.2g since %s, x2 every %.0f min); critical %.0e projected in %.0f min",
			where, what, f.baseBER, f.nowBER, onset, math.Ln2/max(slope, minSlope), f.critical, f.minutesToCritical)
	}
	if st.blind {
		summary += "; symbol_error is saturated: the detector is blind until it is cleared"
	}
	if !ib && st.mode == modePostFEC {
		summary += "; no pre-FEC counter on this port, and these errors passed FEC: frames are being lost"
	}
	return summary
}

// withheldWhy says why a projection is not published.
func withheldWhy(f fitResult) string {
	switch {
	case !f.projected:
		return "too few minutes since the onset to fit"
	case f.minutesToCritical <= 0 || math.IsInf(f.aheadHalf, 1):
		return fmt.Sprintf("%.0f errors since the onset do not give a rise that reaches it", math.Round(processor.Finite(f.postErrors)))
	default:
		return fmt.Sprintf("%.0f min, give or take %.0f, from %.0f errors since the onset", f.minutesToCritical, f.aheadHalf, math.Round(processor.Finite(f.postErrors)))
	}
}

// ethernetEvidence adds the Ethernet figures to the evidence: what the
// bits are (bits_source), the lane with most corrected bits, its share and
// the BER of each lane over bits / lanes where the rate text gives the
// lanes, and the post-FEC figures: the post-FEC BER, the symbol errors and
// CRC errors per second, and the frames lost after FEC as a share of the
// frames received. True when packets are being lost: the post-FEC BER past
// schemas.CriticalPostFECBER, or frames dropped for bad FCS after FEC.
func (st *portState) ethernetEvidence(ev map[string]any) (postFECCritical bool) {
	ev["bits_source"] = st.bitsSrc.String()
	var sum float32
	lane, top := -1, float32(0)
	for i, v := range st.lanes {
		sum += v
		if v > top {
			lane, top = i, v
		}
	}
	if lane >= 0 && sum > 0 {
		ev["lane"] = lane
		ev["lane_share"] = sig4(float64(top / sum))
		if n := schemas.LaneCount(st.rateText); n > 0 && n <= len(st.lanes) && st.phyBits > 0 {
			perLane := float64(st.phyBits) / float64(n)
			bers := make([]float64, n)
			for i := range bers {
				bers[i] = sig4(float64(st.lanes[i]) / perLane)
			}
			ev["lane_ber"] = bers
			ev["lanes"] = n
		}
	}
	if st.phyBits > 0 {
		post, postErrs := float64(st.pcsErrs), st.pcsErrs
		if !st.havePCS {
			post, postErrs = float64(st.symErrs), st.symErrs
		}
		if st.havePCS || st.haveSym {
			post /= float64(st.phyBits)
			ev["post_fec_ber"] = sig4(post)
			if postErrs >= postFECMinErrors && post > schemas.CriticalPostFECBER {
				ev["post_fec_critical"] = true
				postFECCritical = true
			}
		}
	}
	if st.phySecs > 0 {
		if st.haveSym {
			ev["rx_symbol_err_per_s"] = sig4(float64(st.symErrs / st.phySecs))
		}
		if st.haveCRC {
			ev["rx_crc_errors_per_s"] = sig4(float64(st.crcErrs / st.phySecs))
		}
	}
	if st.haveCRC && st.crcErrs+st.rxPackets > 0 {
		ev["frames_lost_after_fec_share"] = sig4(float64(st.crcErrs / (st.crcErrs + st.rxPackets)))
	}
	if st.haveCRC && st.crcErrs >= postFECMinErrors {
		// Frames dropped for a bad FCS after FEC: the link already loses
		// packets, whatever the projection says.
		ev["frames_lost_after_fec"] = true
		postFECCritical = true
	}
	return postFECCritical
}

// bitsWords says what an Ethernet BER was measured against.
func bitsWords(src schemas.PHYBits) string {
	if src == schemas.PHYBitsLineRate {
		return "(link rate x interval)"
	}
	return "rx_bits_phy"
}

// postFECCounter names the counter of a post-FEC series.
func postFECCounter(st *portState) string {
	if st.haveSym || !st.havePCS {
		return "rx_symbol_err_phy"
	}
	return "rx_pcs_symbol_err_phy"
}

// checks are the commands that confirm a drift on the port.
func (d *Detector) checks(s *processor.Sample, ib bool) []schemas.Check {
	dev := s.ID.Device
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -m -c", dev, s.ID.Port), "eye opening, FEC and per-lane BER, module temperature and power; clean and reseat the optic or cable, replace it if the BER keeps rising"),
	}
	if !ib {
		checks = append(checks, processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'phy|lane'", processor.NetdevOf(s.ID, s.Netdev)), "corrected bits per lane: one lane far above the others is the optic"))
	} else {
		checks = append(checks, processor.OnHost(s.ID.Node, fmt.Sprintf("perfquery -x -C %s -P %d", dev, s.ID.Port), "symbol_error and link_error_recovery"))
	}
	return append(checks,
		processor.InRdmawatch(fmt.Sprintf("query ber_trend --node %s --device %s --port %d", s.ID.Node, dev, s.ID.Port), "the BER trend of this port and the worst ports of the fabric"),
		processor.OnSwitch(d.fabric, s.ID, "BER, FEC and lane counters"))
}

// OnWatermark implements processor.FabricDetector: incidents of silent ports resolve.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	d.track().Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
}

// rateGbps is a port's speed from its rate text, 0 when the text is not a
// rate (the detector then falls back to the traffic it sees).
func rateGbps(text string) float64 {
	v, _ := schemas.ParseRateGbps(text)
	return v
}
