package sim

import (
	"math"
	"math/rand/v2"
)

// portModel is a port's steady behaviour: how busy it is and how clean its
// link is. Faults bend it through the Tick knobs.
type portModel struct {
	txUtil, rxUtil float64 // mean share of the line rate
	phase          float64 // of the slow load wave
	packetBytes    float64 // mean packet size on the wire
	preFECBER      float64 // corrected bits per received bit (Ethernet)
	laneWeights    [4]float64
	symbolErrPerS  float64 // InfiniBand symbol errors; zero on most links
	congestion     float64 // ECN/CNP/pause intensity
}

// loadPeriodSeconds is the period of the slow load wave (jobs starting and
// finishing).
const loadPeriodSeconds = 1800

func newPortModel(rng *rand.Rand, util float64, idle bool) portModel {
	m := portModel{
		txUtil:      util * (0.5 + rng.Float64()),
		rxUtil:      util * (0.5 + rng.Float64()),
		phase:       rng.Float64() * 2 * math.Pi,
		packetBytes: 2048 + 2048*rng.Float64(),
		// Healthy pre-FEC BER is 1e-9..1e-8 on 100G/200G PAM4 links.
		preFECBER:  math.Pow(10, -9+rng.Float64()),
		congestion: 0.5 + rng.Float64(),
	}
	if idle {
		m.txUtil, m.rxUtil = 1e-6, 1e-6
	}
	var sum float64
	for i := range m.laneWeights {
		m.laneWeights[i] = 0.5 + rng.Float64()
		sum += m.laneWeights[i]
	}
	for i := range m.laneWeights {
		m.laneWeights[i] /= sum
	}
	if rng.IntN(10) == 0 {
		m.symbolErrPerS = 1e-4 // the odd marginal cable: a symbol error every few hours
	}
	return m
}

func clamp01(x float64) float64 { return max(0, min(x, 0.97)) }

// util is the utilisation over a window: the mean, a slow wave and noise.
func (m *portModel) util(rng *rand.Rand, mean, t float64) float64 {
	wave := 1 + 0.25*math.Sin(2*math.Pi*t/loadPeriodSeconds+m.phase)
	return clamp01(mean * wave * math.Exp(0.25*rng.NormFloat64()-0.03))
}

// advance counts the window's traffic and background errors into the port.
// history is set for the first call, which fills the counters with the
// port's life before the trace.
func (m *portModel) advance(t *Tick, history bool) {
	p, cs, rng := t.Port, t.Port.set, t.Rand
	dt := t.Seconds()
	up := max(0, min(1, t.UpFraction))
	if dt <= 0 {
		return
	}
	now := float64(t.Now.Unix())
	txU, rxU := m.txUtil, m.rxUtil
	if !history {
		txU, rxU = m.util(rng, m.txUtil, now), m.util(rng, m.rxUtil, now+600)
	}
	txU, rxU = clamp01(txU*t.UtilScale), clamp01(rxU*t.UtilScale)
	lineBytesPerS := float64(p.Info.RateGbps) * 1e9 / 8
	txBytes := lineBytesPerS * txU * dt * up
	rxBytes := lineBytesPerS * rxU * dt * up
	txPkts := txBytes / m.packetBytes
	rxPkts := rxBytes / m.packetBytes

	p.add(cs.xmitData, uint64(txBytes/4))
	p.add(cs.rcvData, uint64(rxBytes/4))
	p.add(cs.xmitPackets, uint64(txPkts))
	p.add(cs.rcvPackets, uint64(rxPkts))
	mcastTx, mcastRx := poisson(rng, 0.5*dt*up), poisson(rng, 2*dt*up)
	p.add(cs.multicastXmit, mcastTx)
	p.add(cs.multicastRcv, mcastRx)
	p.add(cs.unicastXmit, uint64(txPkts)-min(uint64(txPkts), mcastTx))
	p.add(cs.unicastRcv, uint64(rxPkts)-min(uint64(rxPkts), mcastRx))

	// Congestion grows steeply with load: ECN marks, CNPs and pauses.
	press := func(u float64) float64 { return m.congestion * u * u * u }
	if p.Info.LinkLayer == LinkLayerInfiniBand {
		// port_xmit_wait counts ticks with data queued and no credits.
		p.add(cs.xmitWait, poisson(rng, 2e5*press(txU)*dt))
		p.add(cs.symbolError, poisson(rng, m.symbolErrPerS*dt))
		p.add(cs.duplicateRequest, poisson(rng, 1e-3*dt))
		p.add(cs.impliedNakSeqErr, poisson(rng, 1e-4*dt))
	} else {
		ecn := poisson(rng, rxPkts*2e-4*press(rxU))
		p.add(cs.ecnMarked, ecn)
		// One CNP per flow per 50 µs at most: the NIC coalesces.
		p.add(cs.cnpSent, binomial(rng, ecn, max(0, min(1, 0.6*t.CNPScale))))
		p.add(cs.cnpHandled, poisson(rng, txPkts*1.2e-4*press(txU)))
		p.add(cs.xmitWait, poisson(rng, 1e-3*dt))
		txPause := poisson(rng, 50*press(rxU)*dt*up)
		rxPause := poisson(rng, 50*press(txU)*dt*up)
		p.add(cs.txPause, txPause)
		p.add(cs.rxPause, rxPause)
		p.add(cs.txPauseMicros, poisson(rng, 6*float64(txPause)))
		p.add(cs.rxPauseMicros, poisson(rng, 6*float64(rxPause)))
		rxBits := float64(p.Info.RateGbps) * 1e9 * dt * up // PHY bits run at line rate, idles included
		p.add(cs.rxBitsPhy, uint64(rxBits))
		corrected := poisson(rng, rxBits*m.preFECBER*t.BERScale)
		p.add(cs.correctedBits, corrected)
		left := corrected
		for i, lane := range cs.lanes {
			n := left
			if i < len(cs.lanes)-1 {
				n = min(left, uint64(math.Round(float64(corrected)*m.laneWeights[i])))
			}
			p.add(lane, n)
			left -= n
		}
	}
	p.add(cs.outOfBuffer, poisson(rng, 1e-3*dt))
	p.add(cs.outOfSequence, poisson(rng, 2e-3*dt))
	p.add(cs.packetSeqErr, poisson(rng, 1e-4*dt))
	p.add(cs.localAckTimeout, poisson(rng, 1e-4*dt))
	p.add(cs.portRcvErrors, poisson(rng, 1e-6*dt))
}

// poisson draws a Poisson count; large means use the normal approximation.
func poisson(rng *rand.Rand, mean float64) uint64 {
	switch {
	case mean <= 0:
		return 0
	case mean < 40:
		limit, prod := math.Exp(-mean), rng.Float64()
		var n uint64
		for prod > limit {
			n++
			prod *= rng.Float64()
		}
		return n
	}
	return uint64(max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
}

// binomial draws successes out of n trials (normal approximation beyond 40).
func binomial(rng *rand.Rand, n uint64, p float64) uint64 {
	if n < 40 {
		var k uint64
		for range n {
			if rng.Float64() < p {
				k++
			}
		}
		return k
	}
	mean := float64(n) * p
	k := math.Round(mean + math.Sqrt(mean*(1-p))*rng.NormFloat64())
	return uint64(max(0, min(k, float64(n))))
}
