package stats

import "math"

// AccelResult is a Poisson fit of a rate whose log rises with a slope that
// itself grows exponentially:
//
//	ln rate(t) = C + S * g(t - T0),  g(h) = (exp(R h) - 1) / R  (h at R = 0)
//
// C is the log rate at T0, S the slope of the log rate at T0, R the growth
// rate of that slope (1/R its e-folding time; R = 0 is a straight line in
// log rate). A failing optic's BER rises this way: the doubling time
// shrinks as it degrades, so a straight line through the log BER (the
// hinge) projects its crossing late.
type AccelResult struct {
	C, S, R float64
	// LogLik is the Poisson log-likelihood of the best fit and LinLogLik
	// that of the best straight line (R = 0), both up to the same constant.
	LogLik, LinLogLik float64
	// LinC, LinS are the straight line's level and slope at T0.
	LinC, LinS float64
	// Dispersion is the Pearson overdispersion of the points with an
	// expected count of at least 5 under the fit, times the AR(1) factor
	// (1+rho)/(1-rho) of their lag-1 autocorrelation (at least 1): a slow
	// wander of the rate bends a line as acceleration does.
	Dispersion float64
	OK         bool
	// Profile holds the fit at every rate searched (R = 0 first): what
	// ReachSpread reads to carry the uncertainty of R.
	Profile []AccelPoint
}

// AccelPoint is the best level and slope at one rate R, and its
// log-likelihood.
type AccelPoint struct{ R, C, S, LogLik float64 }

// LR is the likelihood ratio statistic of the accelerating fit against the
// straight line, scaled by the dispersion (quasi-Poisson).
func (r AccelResult) LR() float64 {
	if !r.OK {
		return 0
	}
	return max(0, 2*(r.LogLik-r.LinLogLik)/r.Dispersion)
}

// At is the fitted log rate at h = t - T0 (R = 0: the straight line of
// the fit, not LinC/LinS).
func (r AccelResult) At(h float64) float64 { return r.C + r.S*accelG(r.R, h) }

// Reach is the h at which the fitted log rate reaches level (positive when
// it lies ahead of T0, negative behind), +Inf when it never does.
func (r AccelResult) Reach(level float64) float64 { return accelReach(r.C, r.S, r.R, level) }

// LinReach is Reach for the straight line.
func (r AccelResult) LinReach(level float64) float64 { return accelReach(r.LinC, r.LinS, 0, level) }

func accelReach(c, s, rate, level float64) float64 {
	d := level - c
	if d == 0 {
		return 0
	}
	if s <= 0 {
		return math.Inf(1)
	}
	if rate <= 0 {
		return d / s
	}
	x := 1 + rate*d/s
	if x <= 0 {
		return math.Inf(-1) // behind the fit's asymptote: never, looking back
	}
	return math.Log(x) / rate
}

func accelG(rate, h float64) float64 {
	if rate*math.Abs(h) < 1e-8 {
		return h
	}
	return math.Expm1(rate*h) / rate
}

// Search of R: a geometric grid of slope e-folding times from accelTauMax
// down to accelTauMin (in the time unit of t), then a golden-section
// refinement between the neighbours of the best grid point.
const (
	accelGrid       = 24
	accelRefineIter = 20
	accelNewtonIter = 50
	accelMinMean    = 5 // Pearson residuals need an expected count of about 5
	accelMaxRho     = 0.9
)

// AccelFit fits the model over the points t (ascending), k (events), b
// (exposure) with T0 = t0, R searched over [1/tauMax, 1/tauMin] and 0.
// Slopes may be negative (the fit says what the data say); R is never
// negative: a slowing rise is left to the straight line. The result is
// not OK with fewer than 3 points or no events.
func AccelFit(t, k, b []float64, t0, tauMin, tauMax float64) AccelResult {
	var res AccelResult
	n := len(t)
	var kTot float64
	for _, v := range k {
		kTot += v
	}
	if n < 3 || kTot <= 0 || tauMin <= 0 || tauMax <= tauMin {
		return res
	}
	f := accelFitter{h: make([]float64, n), x: make([]float64, n), k: k, b: b}
	for i := range t {
		f.h[i] = t[i] - t0
	}
	c, s, ll := f.at(0, math.NaN(), 0)
	res.LinC, res.LinS, res.LinLogLik = c, s, ll
	res.Profile = make([]AccelPoint, 0, accelGrid+1)
	res.Profile = append(res.Profile, AccelPoint{0, c, s, ll})
	res.C, res.S, res.R, res.LogLik = c, s, 0, ll
	rates, best := f.grid(&res, tauMin, tauMax)
	if best >= 0 {
		f.refine(&res, rates, best)
	}
	res.Dispersion = accelDispersion(&res, f.h, k, b)
	res.OK = true
	return res
}

// accelFitter holds the points of one AccelFit: h the times from T0, x
// the scratch for g(h) at the rate being fitted.
type accelFitter struct {
	h, x, k, b []float64
}

// at is the best level and slope at one rate, from c0, s0, and their
// log-likelihood.
func (f *accelFitter) at(rate float64, c0, s0 float64) (c, s, ll float64) {
	for i := range f.h {
		f.x[i] = accelG(rate, f.h[i])
	}
	return poissonLogLinear(f.x, f.k, f.b, c0, s0)
}

// grid fits every rate of the geometric grid from 1/tauMax to 1/tauMin,
// adding each to the profile and keeping the best in res; best is the
// index of the best rate, -1 when the straight line stays best.
func (f *accelFitter) grid(res *AccelResult, tauMin, tauMax float64) (rates []float64, best int) {
	rates = make([]float64, accelGrid)
	best = -1
	for j := range rates {
		tau := tauMax * math.Pow(tauMin/tauMax, float64(j)/float64(accelGrid-1))
		rates[j] = 1 / tau
		cj, sj, llj := f.at(rates[j], res.LinC, res.LinS)
		res.Profile = append(res.Profile, AccelPoint{rates[j], cj, sj, llj})
		if llj > res.LogLik {
			res.C, res.S, res.R, res.LogLik = cj, sj, rates[j], llj
			best = j
		}
	}
	return rates, best
}

// refine searches R by golden section on ln R between the neighbours of
// the best grid rate (below the grid's first, down to half of it), keeping
// the best fit in res.
func (f *accelFitter) refine(res *AccelResult, rates []float64, best int) {
	lo, hi := rates[max(0, best-1)], rates[min(accelGrid-1, best+1)]
	if best == 0 {
		lo = rates[0] / 2
	}
	// Golden section on ln R between the neighbours.
	const g = 0.6180339887498949
	a, z := math.Log(lo), math.Log(hi)
	eval := func(lr float64) float64 {
		cj, sj, llj := f.at(math.Exp(lr), res.C, res.S)
		if llj > res.LogLik {
			res.C, res.S, res.R, res.LogLik = cj, sj, math.Exp(lr), llj
		}
		return llj
	}
	p, q := z-g*(z-a), a+g*(z-a)
	fp, fq := eval(p), eval(q)
	for it := 0; it < accelRefineIter; it++ {
		if fp > fq {
			z, q, fq = q, p, fp
			p = z - g*(z-a)
			fp = eval(p)
		} else {
			a, p, fp = p, q, fq
			q = a + g*(z-a)
			fq = eval(q)
		}
	}
}

// accelDispersion is the dispersion under the chosen fit (see
// AccelResult.Dispersion): 1 with 5 or fewer points of expected count
// accelMinMean or more.
func accelDispersion(res *AccelResult, h, k, b []float64) float64 {
	var pearson, rr, r2 float64
	m := 0
	prev, havePrev := 0.0, false
	for i := range h {
		mu := b[i] * math.Exp(res.At(h[i]))
		if mu < accelMinMean {
			havePrev = false
			continue
		}
		r := (k[i] - mu) / math.Sqrt(mu)
		pearson += r * r
		r2 += r * r
		if havePrev {
			rr += r * prev
		}
		prev, havePrev = r, true
		m++
	}
	dispersion := 1.0
	if m > 3+2 {
		dispersion = max(1, pearson/float64(m-3))
		rho := min(accelMaxRho, max(0, rr/r2))
		dispersion *= (1 + rho) / (1 - rho)
	}
	return dispersion
}

// poissonLogLinear fits k_i ~ Poisson(b_i exp(c + s x_i)) by Newton's
// method with step halving; c0 NaN starts from the pooled rate. It
// returns the log-likelihood without the terms that do not depend on the
// fit (sum of k ln b - ln k!).
func poissonLogLinear(x, k, b []float64, c0, s0 float64) (c, s, ll float64) {
	loglik := func(c, s float64) float64 {
		var l float64
		for i := range x {
			eta := c + s*x[i]
			l += k[i]*eta - b[i]*math.Exp(eta)
		}
		return l
	}
	if math.IsNaN(c0) {
		var kt, bt float64
		for i := range x {
			kt += k[i]
			bt += b[i]
		}
		c0, s0 = math.Log(max(kt, 0.5)/bt), 0
	}
	c, s = c0, s0
	ll = loglik(c, s)
	if math.IsNaN(ll) || math.IsInf(ll, 0) {
		c, s = c0, 0
		ll = loglik(c, s)
	}
	for it := 0; it < accelNewtonIter; it++ {
		var g0, g1, h00, h01, h11 float64
		for i := range x {
			mu := b[i] * math.Exp(c+s*x[i])
			d := k[i] - mu
			g0 += d
			g1 += d * x[i]
			h00 += mu
			h01 += mu * x[i]
			h11 += mu * x[i] * x[i]
		}
		det := h00*h11 - h01*h01
		if !(det > 0) {
			break
		}
		dc := (h11*g0 - h01*g1) / det
		ds := (h00*g1 - h01*g0) / det
		step := 1.0
		improved := false
		for half := 0; half < 30; half++ {
			nc, ns := c+step*dc, s+step*ds
			if nl := loglik(nc, ns); nl >= ll {
				c, s, ll = nc, ns, nl
				improved = true
				break
			}
			step /= 2
		}
		if !improved || math.Abs(step*dc)+math.Abs(step*ds) < 1e-10 {
			break
		}
	}
	return c, s, ll
}

// ReachSpread is how far the reach of level moves over the rates R whose
// profile likelihood is within drop (a chi-square(1) quantile, on the
// dispersion-scaled scale) of the best: the part of a projection's
// uncertainty that comes from not knowing how fast the slope grows, which
// ReachSD leaves out. from is the reach it is measured from (the chosen
// model's). +Inf when a plausible rate never reaches the level.
func (r AccelResult) ReachSpread(level, drop, from float64) float64 {
	if !r.OK {
		return math.Inf(1)
	}
	disp := max(1, r.Dispersion)
	spread := 0.0
	for _, p := range r.Profile {
		if 2*(r.LogLik-p.LogLik)/disp > drop {
			continue
		}
		a := accelReach(p.C, p.S, p.R, level)
		if math.IsInf(a, 0) || math.IsNaN(a) {
			return math.Inf(1)
		}
		spread = max(spread, math.Abs(a-from))
	}
	return spread
}

// ReachSD is the standard error of Reach (accel) or LinReach (not) by the
// delta method: the Poisson Fisher information of the level and slope at
// the fitted rate over the points t (exposure b) the fit used, scaled by
// the dispersion. R is taken as known, so for the accelerating model it is
// a lower bound. +Inf when the level is never reached or the information
// is singular. Why it matters: a projection from a handful of events (an
// InfiniBand link's symbol errors) is uncertain by tens of percent, and a
// figure that cannot be trusted to its stated precision should not be
// published as a time.
func (r AccelResult) ReachSD(t, b []float64, t0, level float64, accel bool) float64 {
	if !r.OK {
		return math.Inf(1)
	}
	c, s, rate := r.LinC, r.LinS, 0.0
	if accel {
		c, s, rate = r.C, r.S, r.R
	}
	reach := accelReach(c, s, rate, level)
	if math.IsInf(reach, 0) || math.IsNaN(reach) {
		return math.Inf(1)
	}
	var i00, i01, i11 float64
	for i := range t {
		x := accelG(rate, t[i]-t0)
		mu := b[i] * math.Exp(c+s*x)
		i00 += mu
		i01 += mu * x
		i11 += mu * x * x
	}
	det := i00*i11 - i01*i01
	if !(det > 0) {
		return math.Inf(1)
	}
	disp := max(1, r.Dispersion)
	vcc, vcs, vss := disp*i11/det, -disp*i01/det, disp*i00/det
	// Numerical gradient of the reach in c and s, steps a tenth of their
	// standard errors.
	ec, es := 0.1*math.Sqrt(vcc), 0.1*math.Sqrt(vss)
	if ec == 0 || es == 0 {
		return math.Inf(1)
	}
	gc := (accelReach(c+ec, s, rate, level) - accelReach(c-ec, s, rate, level)) / (2 * ec)
	gs := (accelReach(c, s+es, rate, level) - accelReach(c, s-es, rate, level)) / (2 * es)
	v := gc*gc*vcc + 2*gc*gs*vcs + gs*gs*vss
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return math.Inf(1)
	}
	return math.Sqrt(max(0, v))
}
