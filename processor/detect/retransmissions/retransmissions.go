// Package retransmissions is the retransmissions detector (layer
// transport): packets lost on a port's link, by the out-of-sequence
// packets its receiver counts (Detector). It registers itself with
// processor.Register; processor/detect/all links it in.
package retransmissions

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/judged"
	"github.com/rdmawatch/rdmawatch/processor/stats"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// retransCriticalFraction: one received packet in a hundred out of sequence
// makes the incident critical. Go-Back-N resends everything after a lost
// packet, so at that loss a large share of the link carries resends.
const retransCriticalFraction = 1e-2

func init() {
	processor.Register(schemas.TypeRetransmissions, func() processor.Detector { return New() })
}

// Detector raises retransmissions (layer transport) when a port's
// receiver counts more out-of-sequence packets (out_of_sequence, and
// duplicate_request: the resent packets it already had) than its own quiet
// history explains, by a statistical test, and by at least a minimum
// effect: packets are lost on its link and Go-Back-N resends them.
//
// The model. A port's out-of-sequence count over a window is quasi-Poisson
// with mean r0 x received packets, r0 the port's usual share (healthy
// reordering from ECMP or adaptive routing, 0 to about 1e-5, which scales
// with traffic: hence per received packet) and a variance phi times the
// mean, phi estimated from the same history (reordering comes in bursts).
// Both are learnt from the port's quiet samples over about an hour of data
// (lossSpan), frozen while its counts are in excess or an incident is
// open. Every sample, the last two minutes (lossWindow, in 10 s buckets, so
// 1 s, 5 s and 10 s intervals are judged alike) are compared with the
// history by the conditional binomial test of two Poisson rates on the
// counts divided by phi (stats.RateTestQuasi), which carries the history's
// own uncertainty: a port quiet for an hour with zero out-of-sequence
// packets needs only a handful to be significant, a port that always
// reorders needs a rise well outside its own noise. Reordering need not
// scale with traffic (route changes and congestion reorder a few packets
// a second whatever the load), so the window is also tested against the
// history's out-of-sequence packets per second, and the larger p-value
// and the smaller excess decide: a port whose traffic falls tenfold does
// not turn its usual reordering into a loss.
//
// Open: the window's p-value is at most lossAlpha = 1e-9 and the excess is
// at least the minimum effect, for OpenAfter (1 min) and 3 samples in a
// row. False-alarm rate: at most one evaluation per second (1 s
// intervals) is 86,400 a port-day, so by Bonferroni at most 8.6e-5 false
// openings per port-day from the test alone, under 1 in 10,000 port-days;
// requiring a minute of consecutive holds only lowers it.
// TestRetransFalseAlarms replays 1000 port-hours of healthy Poisson and
// overdispersed reordering (1e-7 to 1e-4 of packets, traffic that changes
// 20-fold) and finds none.
//
// Minimum effect, in lost packets. One loss makes between 1 and about 40
// out-of-sequence packets (Go-Back-N resends what was in flight; the
// bandwidth-delay product and the message size decide), so the
// out-of-sequence excess alone cannot tell a loss of 1e-6 (which shows at
// least 1e-6 out of sequence) from one of 1e-7 with long windows (up to
// 4e-6). What tells them apart is the clumping: a loss's out-of-sequence
// packets arrive together, so the index of dispersion of the excess
// counts over the samples since the excess began (Pearson's statistic)
// estimates the out-of-sequence packets per loss; its upper 95% bound
// (stats.PearsonIndexUpper), clipped to [1, 40], divides the excess into
// a lower bound of the loss: 40 per loss until enough samples say less,
// as the conservative conversion must. The incident needs
//
//   - an out-of-sequence excess of at least lossMinExcess = 5e-7 of
//     received packets (any loss of 1e-6 shows twice that),
//   - a lower bound of the loss of at least lossMinLoss = 2e-7 of received
//     packets (five times below the 1e-6 from which every sustained loss
//     must be found, twice above the 1e-7 that must not page: the margins
//     absorb the bound's width while the samples are few), and
//   - at least lossMinLostPerS = 0.02 lost packets per second (one a
//     minute: on an idle port a share means nothing).
//
// On a port whose own link is known to fail (an open ber_drift, past
// critical or still drifting, or a link_flap of the same link, in the
// book of processor.Causes: LinkHealth), loss is expected, and it comes in
// bursts around the flaps or with the BER's swings, whose clumping says nothing
// of the Go-Back-N window: every out-of-sequence packet is then taken as a
// loss (factor 1). The significance test still decides. A port with an
// open cnp_ecn_imbalance of its own (LinkHealth.CongestionLoss) loses
// packets because its senders are not slowed down: that loss is the
// imbalance's symptom and opens no incident of its own.
//
// Resolution has hysteresis: an open incident holds while the window stays
// significant at 1e-3 and at half the minimum effect, and resolves after 3
// minutes below that.
//
// The subject is the port whose link loses packets. The senders whose
// packet_seq_err, implied_nak_seq_err or local_ack_timeout_err rise because
// of it are evidence ("peers"); one of them becomes a subject only when no
// port of the fabric shows out-of-sequence excess for QuietFor (the lossy
// receiver is not monitored): that path keeps the factor-and-floor test of
// the judged engine (JudgedTunables, MinRate and the secondary floor).
//
// ConnectX-3 (mlx4) ports count the same events under other names:
// rq_num_oos and rq_num_dup on the receiver, sq_num_oos and sq_num_to on
// the senders (judged/counterids_mlx4.go). Frames the MAC dropped as corrupt
// (rx_crc_errors_phy, mlx4_en's rx_crc_errors and rx_errors) are reported
// with the incident, never judged: they say the loss is on the link itself.
type Detector struct {
	// JudgedTunables: the factor and floor judge the senders' NAKs of a
	// port whose receiver is not monitored; the policy is the incident's.
	judged.Tunables
	*judged.Engine // a pointer: the engine's fields are no settings (see processor.Settings)
}

// New returns the detector with its defaults.
func New() *Detector {
	d := &Detector{Engine: &judged.Engine{
		Type:  schemas.TypeRetransmissions,
		Layer: schemas.LayerTransport,
		Primary: append(judged.Counters(schemas.SourceHWCounters, "out_of_sequence", "duplicate_request"),
			judged.Counters(schemas.SourceHWCounters, judged.RetransPrimaryMLX4...)...),
		Secondary: append(judged.Counters(schemas.SourceHWCounters, "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err"),
			judged.Counters(schemas.SourceHWCounters, judged.RetransSecondaryMLX4...)...),
		EvidenceOnly: judged.Counters(schemas.SourceEthtool, judged.RetransPhysical...),
		PerPacket:    true,
		Loss:         lossJudge,
		LossEvidence: lossEvidence,
		Factor:       8,
		Floor:        2e-4, // out of sequence per received packet (secondary-only path)
		MinRate:      20,   // NAKs per second of a secondary-only subject
		SecFloor:     2e-5, // NAKs per transmitted packet
		SecondaryRun: 4,
		QuietFor:     2 * time.Minute,
		Warm:         12,
		BaseSpan:     30 * time.Minute,
		Policy: processor.Policy{
			OpenAfterSamples:   3,
			OpenAfter:          time.Minute,
			ResolveAfter:       3 * time.Minute,
			MinUpdateInterval:  time.Minute,
			SilentResolveAfter: 30 * time.Minute,
		},
	}}
	d.Describe = describeRetransmissions
	d.ExportTunables(&d.Tunables)
	return d
}

// The loss test's constants (see Retransmissions).
const (
	lossAlpha       = 1e-9 // p-value to open
	lossKeepAlpha   = 1e-3 // p-value to stay open
	lossSegAlpha    = 1e-4 // p-value that starts an excess segment
	lossSegEndAlpha = 1e-2 // p-value above which the segment ends
	lossMinExcess   = 5e-7 // out of sequence per received packet above the usual
	lossMinLoss     = 2e-7 // estimated lost packets per received packet
	lossMinLostPerS = 0.02 // estimated lost packets per second
	lossMaxFactor   = 40   // out-of-sequence packets per loss, at most
	lossSpan        = time.Hour
	lossWarm        = 5 * time.Minute // quiet history before the port is judged
	lossRelearn     = 30 * time.Minute
	lossBucketMs    = 10_000
	lossWindowMs    = 120_000
	lossBuckets     = lossWindowMs/lossBucketMs + 1
	// lossPhiPrior and lossSegPrior: pseudo-observations of a Poisson
	// count behind the history's and the segment's dispersion.
	lossPhiPrior = 10
	lossSegPrior = 2
	// lossClumpZ: the one-sided 95% normal quantile of the bound on the
	// out-of-sequence packets per loss.
	lossClumpZ = 1.645
)

// lossPort is a port's loss-test state: about 400 bytes, kept only on
// ports whose counters ever moved.
type lossPort struct {
	kh, nh  float64 // the quiet history: out-of-sequence and received packets, decayed
	sh      float64 // the same history's seconds, decayed alike
	disp    stats.Dispersion
	histMs  int64 // data time the history covers (not decayed: for lossWarm)
	buckets [lossBuckets]lossBucket
	// The current excess segment: since the window turned significant.
	seg              bool
	segFrom          schemas.Millis
	segK, segN, segQ float64 // sums of k, n and k^2/n
	segM             int

	// What the latest sample said, for the finding.
	p, ratio, base, baseRate, excess, phi, factor, lost, lostPerS, pps float64
	explained, congestion                                              bool
}

type lossBucket struct {
	id      int64
	k, n, s float64 // out of sequence, received packets, seconds
}

// window sums the buckets of the last lossWindowMs up to bucket id cur.
func (lp *lossPort) window(cur int64) (k, n, secs float64) {
	for _, b := range lp.buckets {
		if b.id > cur-lossBuckets && b.id <= cur && b.n > 0 {
			k, n, secs = k+b.k, n+b.n, secs+b.s
		}
	}
	return k, n, secs
}

// test is the p-value of the window's k against the quiet history under
// the null that explains the window best: out-of-sequence packets in
// proportion to received packets (reordering that scales with traffic),
// or in proportion to time (reordering from route changes and congestion
// that does not fall when traffic does). Taking the larger p-value makes
// a port that always reordered a few packets a second not look lossy
// when its traffic drops tenfold; a loss scales with packets and raises
// the count under both.
func (lp *lossPort) test(kw, nw, sw, phi float64) float64 {
	p := stats.RateTestQuasi(kw, nw, lp.kh, lp.nh, phi)
	if lp.sh > 0 && sw > 0 {
		p = max(p, stats.RateTestQuasi(kw, sw, lp.kh, lp.sh, phi))
	}
	return p
}

// lossJudge judges the sample's out-of-sequence count k over n received
// packets; it returns whether the port holds (an incident opens or stays
// open on it) and updates the port's history when it is quiet.
func lossJudge(port *processor.PortState, s *processor.Sample, st *judged.Port, k, n float64, open bool, em processor.Emitter) bool {
	secs := float64(s.IntervalMs) / 1000
	lp := lossPortOf(port, s, st, n, secs)
	kw, nw, sw := lp.addSample(s, k, n, secs)
	lp.score(port, s, kw, nw, sw, secs)
	warm := lp.histMs >= lossWarm.Milliseconds()
	lp.advanceSegment(s, k, n, warm)
	lp.estimateLoss(s, kw, nw, sw, open, em)

	alpha, scale := lossAlpha, 1.0
	if open {
		alpha, scale = lossKeepAlpha, 0.5
	}
	hold := warm && lp.seg && lp.p <= alpha && lp.excess >= scale*lossMinExcess &&
		lp.lost >= scale*lossMinLoss && lp.lostPerS >= scale*lossMinLostPerS && !lp.congestion

	if !warm || !hold && !open && (!lp.seg || s.Time-lp.segFrom > millis(lossRelearn)) {
		// A quiet sample teaches the history; one whose window is in
		// excess (even below the minimum effect) does not, so a loss that
		// creeps in is not learnt as the port's usual, until it has
		// lasted lossRelearn without reaching the minimum effect: then it
		// is the port's new usual (a routing change that reorders more).
		lp.learn(k, n, secs, s.IntervalMs)
	}
	return hold
}

// lossPortOf is the port's loss-test state, made on the first sample that
// moved a counter with the history of the quiet samples before it.
func lossPortOf(port *processor.PortState, s *processor.Sample, st *judged.Port, n, secs float64) *lossPort {
	lp, _ := st.Loss.(*lossPort)
	if lp == nil {
		lp = &lossPort{}
		st.Loss = lp
		// Every sample before this one was quiet (the state is made on
		// the first that moved a counter): as many packets as now.
		lp.nh = float64(port.Samples) * n * math.Min(1, lossSpan.Seconds()/math.Max(1, float64(port.Samples)*secs))
		lp.sh = math.Min(lossSpan.Seconds(), float64(port.Samples)*secs)
		lp.histMs = int64(port.Samples) * s.IntervalMs
	}
	return lp
}

// addSample adds the sample to its bucket and returns the window's sums of
// out-of-sequence packets, received packets and seconds.
func (lp *lossPort) addSample(s *processor.Sample, k, n, secs float64) (kw, nw, sw float64) {
	id := int64(s.Time) / lossBucketMs
	b := &lp.buckets[id%lossBuckets]
	if b.id != id {
		*b = lossBucket{id: id}
	}
	b.k, b.n, b.s = b.k+k, b.n+n, b.s+secs
	return lp.window(id)
}

// score tests the window (kw, nw, sw) against the quiet history: the
// history's usual per packet and per second, its dispersion, the p-value,
// the window's ratio and excess, and its packets per second.
func (lp *lossPort) score(port *processor.PortState, s *processor.Sample, kw, nw, sw, secs float64) {
	lp.base, lp.baseRate = 0, 0
	if lp.nh > 0 {
		lp.base = lp.kh / lp.nh
	}
	if lp.sh > 0 {
		lp.baseRate = lp.kh / lp.sh
	}
	lp.phi = min(lp.disp.Index(lossPhiPrior), 100)
	lp.p = lp.test(kw, nw, sw, lp.phi)
	lp.ratio = kw / math.Max(nw, 1)
	// The excess over what the better-fitting null expects (see test).
	lp.excess = (kw - math.Max(lp.base*nw, lp.baseRate*sw)) / math.Max(nw, 1)
	winSecs := math.Min(float64(lossWindowMs)/1000, float64(s.Time-port.FirstTime)/1000+secs)
	lp.pps = nw / math.Max(winSecs, secs)
}

// advanceSegment extends the excess segment with the sample while the
// window stays significant, or ends it. While the port is warming up
// there is none: what it shows then is its usual.
func (lp *lossPort) advanceSegment(s *processor.Sample, k, n float64, warm bool) {
	if warm && (lp.p <= lossSegAlpha || (lp.seg && lp.p <= lossSegEndAlpha)) {
		if !lp.seg {
			lp.segFrom = s.Time
		}
		lp.seg = true
		lp.segK, lp.segN, lp.segM = lp.segK+k, lp.segN+n, lp.segM+1
		if n > 0 {
			lp.segQ += k * k / n
		}
	} else {
		lp.seg, lp.segK, lp.segN, lp.segQ, lp.segM = false, 0, 0, 0, 0
	}
}

// estimateLoss weighs the segment's clumping (re-testing the window on the
// clumps when they are new to the port), the out-of-sequence packets per
// loss, whether a failing link explains the segment or congestion causes
// it, and the losses estimated from them.
func (lp *lossPort) estimateLoss(s *processor.Sample, kw, nw, sw float64, open bool, em processor.Emitter) {
	if clump := min(stats.PearsonIndex(lp.segK, lp.segN, lp.segQ, lp.segM, lossSegPrior), lossMaxFactor); clump > lp.phi {
		// The excess comes in clumps its history never showed (a port
		// with no events yet has no dispersion to learn from): judge the
		// clumps, not the packets, so that three bursts of reordering are
		// three events.
		lp.p = lp.test(kw, nw, sw, clump)
	}
	// Out of sequence per loss: the upper 95% bound of the clumping, so
	// that the loss it gives is a lower bound (a handful of samples does
	// not make a long Go-Back-N window look like many losses).
	lp.factor = min(stats.PearsonIndexUpper(lp.segK, lp.segN, lp.segQ, lp.segM, lossClumpZ), lossMaxFactor)
	lp.explained = false
	lp.congestion = false
	if lp.seg {
		if lh, ok := em.(processor.LinkHealth); ok {
			if lh.LinkFailing(s.ID.Subject(), s.Time) {
				lp.explained, lp.factor = true, 1
			} else if !open && lh.CongestionLoss(s.ID.Subject(), s.Time) {
				lp.congestion = true
			}
		}
	}
	lp.lost = lp.excess / lp.factor
	lp.lostPerS = lp.lost * lp.pps
}

// learn teaches the quiet history the sample: decayed over lossSpan, with
// its dispersion.
func (lp *lossPort) learn(k, n, secs float64, intervalMs int64) {
	w := math.Exp(-secs / lossSpan.Seconds())
	mu := n * (lp.kh + 0.5) / math.Max(lp.nh, 1)
	if lp.nh > 0 {
		lp.disp.Add(k, mu, w)
	}
	lp.kh, lp.nh, lp.sh = lp.kh*w+k, lp.nh*w+n, lp.sh*w+secs
	lp.histMs += intervalMs
}

// lossEvidence adds the loss test's figures to a finding's evidence: the
// last two minutes against the port's quiet history.
func lossEvidence(st *judged.Port, ev map[string]any) {
	lp, _ := st.Loss.(*lossPort)
	if lp == nil {
		return
	}
	ev["baseline"] = sig(lp.base)
	ev["window_s"] = float64(lossWindowMs) / 1000
	ev["p_value"] = sig(lp.p)
	ev["dispersion"] = sig(lp.phi)
	ev["excess_per_received_packet"] = sig(lp.excess)
	ev["oos_per_loss"] = sig(lp.factor)
	ev["lost_per_received_packet"] = sig(lp.lost)
	ev["lost_per_s"] = sig(lp.lostPerS)
	ev["loss_explained_by_link"] = lp.explained
}

func describeRetransmissions(j *judged.Engine, s *processor.Sample, st *judged.Port, secondaryOnly bool) (string, string, []schemas.Check) {
	where := processor.PortName(s.ID, s.Netdev)
	severity := schemas.SeverityWarning
	mlx4 := judged.MLX4(s)
	seqErr, ackTimeout := "packet_seq_err", "local_ack_timeout_err"
	nakCounters := "out_of_sequence, packet_seq_err, local_ack_timeout_err"
	if mlx4 {
		seqErr, ackTimeout = "sq_num_oos", "sq_num_to"
		nakCounters = "rq_num_oos, sq_num_oos, sq_num_to"
	}
	var summary string
	if secondaryOnly {
		summary = fmt.Sprintf("%s: %s/s NAK sequence errors and ACK timeouts (%s %s/s, %s %s/s) and no monitored port reports the lost packets: packets to its peers are lost and Go-Back-N resends them",
			where, processor.HumanRate(st.Peak), seqErr, processor.HumanRate(j.RateOf(st, seqErr)), ackTimeout, processor.HumanRate(j.RateOf(st, ackTimeout)))
	} else {
		if st.Figure >= retransCriticalFraction {
			severity = schemas.SeverityCritical
		}
		lp, _ := st.Loss.(*lossPort)
		per := fmt.Sprintf("%s out of sequence per loss", trimf(lp.factor))
		if lp.explained {
			per = "each out-of-sequence packet taken as a loss on a link known to fail"
		}
		summary = fmt.Sprintf("%s: %s out-of-sequence packets/s over the last 2 minutes (%.2g of received packets; its usual %.2g, the fabric's %.2g): about %s lost packets/s (%.2g of received packets, %s): packets are lost on its link and Go-Back-N resends them",
			where, processor.HumanRate(lp.ratio*lp.pps), lp.ratio, lp.base, j.PeerRef(), processor.HumanRate(lp.lostPerS), lp.lost, per)
	}
	// Corrupt frames the MAC dropped on the same port: the loss is physical.
	for _, name := range judged.RetransPhysical {
		if r := j.RateOf(st, name); r > 0 {
			summary += fmt.Sprintf("; its MAC drops corrupt frames (%s %s/s)", name, processor.HumanRate(r))
			break
		}
	}
	nd := processor.NetdevOf(s.ID, s.Netdev)
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port), nakCounters+" now"),
	}
	if mlx4 {
		// mlxlink does not know ConnectX-3; the IB error counters and the
		// netdev's MAC errors tell a bad cable there. The diagnostic
		// counters are per device: both ports' traffic is in them.
		checks = append(checks,
			processor.OnHost(s.ID.Node, fmt.Sprintf("grep . /sys/class/infiniband/%s/hw_counters/{rq_num_oos,sq_num_oos,sq_num_to,rq_num_dup}", s.ID.Device), "the device's sequence counters (mlx4 counts them per device, both ports together)"),
			processor.OnHost(s.ID.Node, fmt.Sprintf("perfquery -C %s -P %d", s.ID.Device, s.ID.Port), "symbol errors and receive errors of the link: a lossy cable"),
			processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'rx_crc_errors|rx_errors|rx_dropped|pause'", nd), "corrupt frames the MAC dropped and whether pauses come with the loss"))
	} else {
		checks = append(checks,
			processor.OnHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -c -e", s.ID.Device, s.ID.Port), "pre-FEC/post-FEC BER and symbol errors of the link: a lossy optic or cable"),
			processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'discard|out_of_buffer|pause|corrected|crc'", nd), "drops on the port and whether pauses or buffer drops come with the loss"))
	}
	checks = append(checks,
		processor.OnSwitch(j.Fabric(), s.ID, "errors, discards and FEC"),
		processor.InRdmawatch(fmt.Sprintf("events --node %s --type ber_drift,link_flap", s.ID.Node), "a BER drift or flap of the same link that explains the loss"))
	return summary, severity, checks
}

// sig rounds to 3 significant digits for evidence, as the judged engine does.
func sig(v float64) float64 { return processor.SigDigits(v, 3) }

// trimf writes v to 3 significant digits.
func trimf(v float64) string { return strconv.FormatFloat(sig(v), 'f', -1, 64) }

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }
