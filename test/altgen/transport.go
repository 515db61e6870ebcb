package altgen

import (
	"math"
	"math/rand/v2"
	"time"
)

// Transport and application faults, and their noise.
//
// The model: a lossy link drops a share of the packets it delivers to a
// host port; the receiver then counts every packet of the window in flight
// behind a lost one as out of sequence (Go-Back-N, about 30 per loss) and a
// few duplicates, and the senders that talk to it get one NAK per loss
// (packet_seq_err) and an ACK timeout now and then. A starving receiver
// drops what arrives without a posted receive buffer (out_of_buffer, the
// same on ethtool rx_out_of_buffer, some rx_discards_phy), and its senders'
// RNR retries run out. A broken application fails completions on its port
// (one error family: remote access or local length) and flushes its queue
// pairs after each failure.
//
// Noise on healthy ports: reordering on RoCE ports with ECMP/adaptive
// routing (out_of_sequence in proportion to what they receive, a per-port
// share of 1e-7 to 1e-4, and the NAKs of it), incast blips of out_of_buffer
// (3 to 15 s, hundreds to thousands a second), and a stray failed completion
// with its flushes when an application exits.
const (
	Retransmissions   = "retransmissions"    // a lossy link: Go-Back-N resends
	RetransBER        = "retrans_ber"        // a BER drift past critical that loses packets
	ReceiveStarvation = "receive_starvation" // a receiver does not post buffers
	StarvationStorm   = "starvation_storm"   // the same, and its NIC pauses the fabric
	CompletionErrors  = "completion_errors"  // an application's completions fail
	// StarvationRNR: a receiver whose RC queue pairs have no receive
	// posted answers with RNR NAKs; its senders back off for the RNR timer
	// and retry, so the drops are few (each NAKed packet counts once in
	// out_of_buffer) and the senders count about as many RNR NAKs.
	StarvationRNR = "starvation_rnr"
	// StarvationDiscards: a host that cannot take packets off the NIC
	// fast enough (PCIe backpressure, a slow IOMMU): the NIC's receive
	// buffer overflows. PFC protects the lossless priority (the port
	// pauses its link a little) and the lossy classes are discarded:
	// rx_discards_phy, with no out_of_buffer and no RNR NAKs.
	StarvationDiscards = "starvation_discards"
)

// LabelCause is the root cause a label names.
type LabelCause struct {
	Type    string         `json:"type"`
	Subject map[string]any `json:"subject"`
}

// appState is a port's transport and application state.
type appState struct {
	loss        float64 // lost share of received packets
	lossPeers   []*port
	lossFromBER bool    // loss follows the BER past critical
	starve      float64 // out_of_buffer per second
	starvePeers []*port
	starveKind  int     // 0 out_of_buffer, 1 RNR NAKs, 2 rx_discards_phy
	cqe         float64 // failed completions per second
	cqeKind     int
	reorder     float64 // healthy out-of-sequence share
	blipTo      float64
	blipRate    float64
	blipPhy     bool    // the blip overflows the NIC buffer (rx_discards_phy) instead
	pauseTx     float64 // tx pause share the starving port adds (StarvationDiscards)
}

var appCounters = []string{"req_cqe_error", "req_cqe_flush_error", "req_remote_access_errors", "req_remote_invalid_request",
	"resp_cqe_error", "resp_cqe_flush_error", "resp_local_length_error", "resp_remote_access_errors"}

// rn is the random source of the transport and application model, apart
// from g.r so that the older parts of a seed's trace stay as they were.
func (g *gen) rn() *rand.Rand {
	if g.rApp == nil {
		g.rApp = rand.New(rand.NewPCG(g.cfg.Seed^0x5bd1e995, 91))
	}
	return g.rApp
}

func (g *gen) initApp(p *port) {
	if p.ib {
		return
	}
	r := g.rn()
	p.app.reorder = 1e-7
	if r.Float64() < 0.35 {
		p.app.reorder = math.Min(1e-4, math.Exp(math.Log(1e-5)+r.NormFloat64()))
	}
	if g.drawn() {
		// Adaptive routing on some ports only, up to the fabric's
		// ReorderMax; the draws above are kept so the transport source
		// runs as under fixed physics.
		rp := g.physicsSource()
		p.app.reorder = 0
		if rp.Float64() < g.ph.ReorderShare {
			p.app.reorder = g.ph.ReorderMax * math.Exp(-rp.Float64()*math.Log(100))
		}
	}
}

// peersOf picks n RoCE ports with hw counters other than p.
func (g *gen) peersOf(p *port, n int) []*port {
	var c []*port
	for _, q := range g.ports {
		if q != p && !q.ib && q.hwOK && q.node != p.node {
			c = append(c, q)
		}
	}
	g.rn().Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:min(n, len(c))]
}

// planApp plans one transport or application fault; false if the kind is
// not one of them.
func (g *gen) planApp(f Fault, used map[*port]bool, usedNodes map[string]bool) bool {
	switch f.Kind {
	case Retransmissions, RetransBER, ReceiveStarvation, StarvationStorm, CompletionErrors, StarvationRNR, StarvationDiscards:
	default:
		return false
	}
	r := g.rn()
	dur := g.cfg.Duration.Seconds()
	at := f.At.Seconds()
	end := dur + 1e9
	if f.Dur > 0 {
		end = at + f.Dur.Seconds()
	}
	p := g.pick(-1, func(p *port) bool { return !p.ib && p.hwOK && p.ethOK && !usedNodes[p.node] }, used)
	if p == nil {
		return true
	}
	used[p], usedNodes[p.node] = true, true
	label := func(typ string, from, to float64) *Label {
		l := Label{Type: typ, Start: ts(g.cfg.Start, from), Subject: g.subject(p)}
		if to < dur {
			e := ts(g.cfg.Start, to)
			l.End = &e
		}
		g.labels = append(g.labels, l)
		return &g.labels[len(g.labels)-1]
	}
	switch f.Kind {
	case Retransmissions:
		p.app.lossPeers = g.peersOf(p, 2+r.IntN(3))
		loss := math.Exp(math.Log(5e-5) + r.Float64()*math.Log(20))
		if g.drawn() {
			// The incident: at least 1e-6 of received packets,
			// for at least 2 minutes, on a port whose own history is
			// quiet (no adaptive-routing reordering of its own).
			lo, hi := g.ph.LossLo, g.ph.LossHi
			loss = math.Max(physicsRanges.LabelledLossMin, math.Exp(math.Log(lo)+g.physicsSource().Float64()*math.Log(hi/lo)))
			end = math.Max(end, at+physicsRanges.LabelledLossMinDur.Seconds())
			p.app.reorder = 0
			if at+physicsRanges.LabelledLossMinDur.Seconds() > dur {
				return true // no room for 2 minutes of loss: no fault
			}
		}
		g.at(at, "loss", p, nil, loss)
		g.at(end, "loss", p, nil, 0)
		label(Retransmissions, at, end)
	case RetransBER:
		ff := f
		if ff.Ramp <= 0 {
			ff.Ramp = time.Duration(15+r.IntN(15)) * time.Minute
		}
		ff.Shape = 1 + r.Float64()*0.5
		g.drawRamp(p, &ff)
		p.drift = &ff
		p.app.lossPeers = g.peersOf(p, 2+r.IntN(3))
		p.app.lossFromBER = true
		crit := at + ff.Ramp.Seconds()
		g.labels = append(g.labels, Label{Type: "ber_drift", Start: ts(g.cfg.Start, at), Subject: g.phySubject(p), CriticalAt: ts(g.cfg.Start, crit)})
		// Post-FEC loss starts as the BER passes critical.
		l := label(Retransmissions, crit, dur+1)
		l.Cause = &LabelCause{Type: "ber_drift", Subject: g.subject(p)}
	case ReceiveStarvation, StarvationStorm:
		p.app.starvePeers = g.peersOf(p, 2+r.IntN(4))
		g.at(at, "starve", p, nil, 300+r.Float64()*4000)
		g.at(end, "starve", p, nil, 0)
		label(ReceiveStarvation, at, end)
		if f.Kind == StarvationStorm {
			// The receive queue backs up into the NIC's buffer a
			// minute or two later: then the port pauses its link.
			from := at + 60 + r.Float64()*90
			st := g.planStorm(p, from, end, false)
			st.cause = &LabelCause{Type: ReceiveStarvation, Subject: g.subject(p)}
		}
	case StarvationRNR:
		p.app.starvePeers = g.peersOf(p, 2+r.IntN(4))
		p.app.starveKind = 1
		g.at(at, "starve", p, nil, 40+r.Float64()*360)
		g.at(end, "starve", p, nil, 0)
		label(ReceiveStarvation, at, end)
	case StarvationDiscards:
		p.app.starveKind = 2
		g.at(at, "starve", p, nil, 100+r.Float64()*1900)
		g.at(end, "starve", p, nil, 0)
		label(ReceiveStarvation, at, end)
	case CompletionErrors:
		p.app.cqeKind = r.IntN(2)
		g.at(at, "cqe", p, nil, math.Exp(math.Log(1)+r.Float64()*math.Log(60)))
		g.at(end, "cqe", p, nil, 0)
		label(CompletionErrors, at, end)
	}
	return true
}

// applyApp applies a scheduled transport or application edge.
func (g *gen) applyApp(e event) bool {
	switch e.what {
	case "loss":
		e.p.app.loss = e.v
		if g.drawn() {
			e.p.busy = 0
			if e.v > 0 {
				e.p.busy = lossyBusy
			}
		}
	case "starve":
		e.p.app.starve = e.v
	case "cqe":
		e.p.app.cqe = e.v
	default:
		return false
	}
	return true
}

// stepApp advances a RoCE port's transport and application counters by one
// second; pkts is what it received, c its leaf's congestion, ber its link's
// BER.
func (g *gen) stepApp(p *port, t, pkts, c, ber float64) {
	r := g.rn()
	a := &p.app
	// Healthy reordering and the NAKs it draws.
	share := a.reorder
	if g.drawn() {
		// Adaptive routing spreads more flows over more paths as the
		// leaf's load rises: half the share on an idle leaf.
		share *= math.Min(1, 0.5+c)
	}
	reord := poisson(r, pkts*share)
	g.add(p, "out_of_sequence", reord)
	g.add(p, "packet_seq_err", poisson(r, reord/30))
	loss := a.loss
	if a.lossFromBER && ber > 1e-6 {
		loss = math.Min(0.02, 2e-4*math.Pow(ber/1e-6, 2))
	}
	if loss > 0 {
		lost := poisson(r, pkts*loss)
		oos := poisson(r, lost*g.oosPerLoss())
		g.add(p, "out_of_sequence", oos)
		g.add(p, "duplicate_request", poisson(r, lost*0.5))
		for _, q := range a.lossPeers {
			n := float64(len(a.lossPeers))
			g.add(q, "packet_seq_err", poisson(r, lost/n))
			g.add(q, "implied_nak_seq_err", poisson(r, lost*0.05/n))
			g.add(q, "local_ack_timeout_err", poisson(r, lost*0.01/n))
		}
	}
	// Incast blips: a few seconds of receive-buffer drops on a busy leaf
	// (at most one a minute per port: longer drops are starvation).
	// A third of them overflow the NIC's buffer on a lossy class instead
	// (rx_discards_phy alone).
	if g.cfg.Noise && g.leafOn[p.leaf] && c > 0.2 && t > a.blipTo+60 && r.Float64() < 1.0/1200 {
		a.blipTo = t + 3 + r.Float64()*12
		a.blipRate = 200 + r.Float64()*3000
		a.blipPhy = r.Float64() < 1.0/3
	}
	oob, phy := 0.0, 0.0
	if t < a.blipTo {
		if a.blipPhy {
			phy = a.blipRate * (0.5 + r.Float64())
		} else {
			oob = a.blipRate * (0.5 + r.Float64())
		}
	}
	rnr := 0.0
	a.pauseTx = 0
	if a.starve > 0 {
		v := a.starve * math.Exp(0.3*r.NormFloat64())
		switch a.starveKind {
		case 0:
			oob += v
			for _, q := range a.starvePeers {
				g.add(q, "rnr_nak_retry_err", poisson(r, a.starve*0.005/float64(len(a.starvePeers))))
			}
		case 1:
			// Each RNR NAK drops the packet it answers (out_of_buffer)
			// and reaches one sender; the netdev's own rings are not
			// involved (no rx_out_of_buffer).
			rnr = poisson(r, v)
			g.add(p, "out_of_buffer", rnr)
			for _, q := range a.starvePeers {
				g.add(q, "rnr_nak_retry_err", poisson(r, rnr*0.95/float64(len(a.starvePeers))))
			}
		case 2:
			phy += v
			a.pauseTx = 0.05 + 0.15*r.Float64()
		}
	}
	if oob > 0 {
		n := poisson(r, oob)
		g.add(p, "out_of_buffer", n)
		g.add(p, "rx_out_of_buffer", n)
		g.add(p, "rx_discards_phy", poisson(r, n*0.08))
	}
	if phy > 0 {
		g.add(p, "rx_discards_phy", poisson(r, phy))
	}
	// Failed completions: the application's, and a stray one when an
	// application exits.
	cqe := 0.0
	if a.cqe > 0 {
		cqe = poisson(r, a.cqe)
	} else if g.cfg.Noise && r.Float64() < 1.0/(3*3600) {
		cqe = 1
	}
	if cqe > 0 {
		if a.cqeKind == 0 {
			g.add(p, "req_remote_access_errors", cqe)
			g.add(p, "req_cqe_error", cqe)
			g.add(p, "req_cqe_flush_error", poisson(r, cqe*8))
		} else {
			g.add(p, "resp_local_length_error", cqe)
			g.add(p, "resp_cqe_error", cqe)
			g.add(p, "resp_cqe_flush_error", poisson(r, cqe*8))
		}
	}
}
