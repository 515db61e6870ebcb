package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Series is one line of a panel.
type Series struct {
	Name   string
	Color  string
	Values []float64 // one per Plot.Times entry; NaN leaves a gap
}

// Panel is one chart of a plot, sharing the time axis with the others.
type Panel struct {
	Title  string
	Unit   string
	Log    bool // log10 axis (BER); values <= 0 are gaps
	Series []Series
}

// Plot is the key series of a port around an incident, written as SVG by
// hand (no plotting dependency): panels stacked over one time axis, the
// incident's span shaded and each state change marked.
type Plot struct {
	Title      string
	Times      []time.Time
	Panels     []Panel
	SpanStart  time.Time
	SpanEnd    time.Time // zero: still open at the end of the window
	Marks      []time.Time
	MarkLabels []string
}

const (
	svgWidth  = 900
	panelH    = 150
	marginL   = 80
	marginR   = 20
	marginTop = 40
	panelGap  = 30
)

// WriteSVG draws the plot.
func (p *Plot) WriteSVG(w io.Writer) error {
	height := marginTop + len(p.Panels)*(panelH+panelGap) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginL, esc(p.Title))
	if len(p.Times) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no samples in the window</text>`+"\n", marginL, marginTop+20)
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	t0, t1 := p.Times[0], p.Times[len(p.Times)-1]
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	plotW := float64(svgWidth - marginL - marginR)
	x := func(t time.Time) float64 {
		return marginL + plotW*float64(t.Sub(t0))/float64(t1.Sub(t0))
	}
	for i, panel := range p.Panels {
		top := float64(marginTop + i*(panelH+panelGap))
		bottom := top + panelH
		lo, hi := panelRange(panel)
		y := func(v float64) float64 {
			if panel.Log {
				v = math.Log10(v)
			}
			return bottom - panelH*(v-lo)/(hi-lo)
		}
		// The incident's span, then the frame and the axis labels.
		sx := math.Max(x(p.SpanStart), marginL)
		ex := float64(svgWidth - marginR)
		if !p.SpanEnd.IsZero() {
			ex = math.Min(x(p.SpanEnd), ex)
		}
		if ex > sx {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#fde2e2"/>`+"\n", sx, top, ex-sx, panelH)
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#999"/>`+"\n", marginL, top, plotW, panelH)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-weight="bold">%s</text>`+"\n", marginL, top-6, esc(panel.Title))
		for _, frac := range []float64{0, 0.5, 1} {
			v := lo + (hi-lo)*frac
			label := fmt.Sprintf("%.3g", v)
			if panel.Log {
				label = fmt.Sprintf("1e%.0f", v)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s %s</text>`+"\n", marginL-4, bottom-panelH*frac+4, label, esc(panel.Unit))
		}
		for j, m := range p.Marks {
			if m.Before(t0) || m.After(t1) {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="3,3"/>`+"\n", x(m), x(m), top, bottom)
			if i == 0 && j < len(p.MarkLabels) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#c00" font-size="9">%s</text>`+"\n", x(m)+2, top+10+float64(j%4)*10, esc(p.MarkLabels[j]))
			}
		}
		for k, s := range panel.Series {
			var path strings.Builder
			pen := false
			for j, v := range s.Values {
				if j >= len(p.Times) || math.IsNaN(v) || math.IsInf(v, 0) || (panel.Log && v <= 0) {
					pen = false
					continue
				}
				cmd := "L"
				if !pen {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, x(p.Times[j]), math.Max(top, math.Min(bottom, y(v))))
				pen = true
			}
			if path.Len() > 0 {
				fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.3"/>`+"\n", strings.TrimSpace(path.String()), s.Color)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", float64(svgWidth-marginR-150), top+14+float64(k)*13, s.Color, esc(s.Name))
		}
	}
	axisY := marginTop + len(p.Panels)*(panelH+panelGap) - panelGap + 16
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		t := t0.Add(time.Duration(float64(t1.Sub(t0)) * frac))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), axisY, t.UTC().Format("15:04:05"))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">UTC, %s</text>`+"\n", marginL, axisY+14, t0.UTC().Format("2006-01-02"))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panelRange is the y range of a panel (log10 units on a log panel).
func panelRange(p Panel) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || (p.Log && v <= 0) {
				continue
			}
			if p.Log {
				v = math.Log10(v)
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	switch {
	case math.IsInf(lo, 1):
		return 0, 1
	case p.Log:
		return math.Floor(lo), math.Max(math.Ceil(hi), math.Floor(lo)+1)
	}
	lo = math.Min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi * 1.05
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
