package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a panel.
type Series struct {
	Name   string
	Color  string    // #rrggbb
	Values []float64 // one per Plot.Times entry; NaN leaves a gap
	Dashed bool
}

// Level is a horizontal reference line of a panel (a critical BER).
type Level struct {
	Name  string
	Value float64
	Color string
}

// Panel is one chart of a plot, sharing the time axis with the others.
type Panel struct {
	Title  string
	Unit   string
	Log    bool // log10 axis (BER); values <= 0 are gaps
	Series []Series
	Levels []Level
}

// Mark is a moment on the time axis: a state change, or a projection.
type Mark struct {
	At    time.Time
	Label string
}

// Plot is the key series of a port around an incident: panels stacked over
// one time axis, the incident's span shaded, each state change a thin
// numbered tick explained in a list under the plot, and projections (the
// time a drifting BER reaches critical) as dashed lines. gonum/plot draws
// the axes: its ticks are round numbers and its layout keeps labels inside
// the canvas, which a hand-written SVG got wrong.
type Plot struct {
	Title     string
	Times     []time.Time
	Panels    []Panel
	SpanStart time.Time
	SpanEnd   time.Time // zero: still open at the end of the window
	Marks     []Mark    // state changes, numbered in time order
	Projected []Mark    // dashed, labelled in the legend
}

// Layout in points (the SVG's unit).
const (
	plotWidth   = 900
	legendWidth = 200 // right of the panels: legends never cover data
	panelHeight = 150
	titleHeight = 30
	stripHeight = 20 // numbered state-change ticks above the first panel
	listRowH    = 13
	listCols    = 3
	fontSize    = 9
)

var (
	textFont  = font.From(plot.DefaultFont, fontSize)
	titleFont = font.From(plot.DefaultFont, 13)
	spanColor = color.NRGBA{R: 0xfd, G: 0xe2, B: 0xe2, A: 0xff}
	markColor = color.NRGBA{R: 0xc0, A: 0xff}
)

// WriteSVG draws the plot.
func (p *Plot) WriteSVG(w io.Writer) error {
	marks := append([]Mark(nil), p.Marks...)
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].At.Before(marks[j].At) })
	listRows := (len(marks) + listCols - 1) / listCols
	listH := vg.Length(listRows*listRowH + 8)
	n := max(len(p.Panels), 1)
	height := vg.Length(titleHeight+stripHeight+n*panelHeight+30) + listH
	c := vgsvg.New(plotWidth, height)
	dc := draw.New(c)
	dc.FillText(textStyle(titleFont, color.Black), vg.Point{X: 8, Y: height - 20}, p.Title)
	if len(p.Times) == 0 || len(p.Panels) == 0 {
		dc.FillText(textStyle(textFont, color.Black), vg.Point{X: 8, Y: height - 45}, "no samples in the window")
		_, err := c.WriteTo(w)
		return err
	}
	t0, t1 := float64(p.Times[0].Unix()), float64(p.Times[len(p.Times)-1].Unix())
	for _, m := range p.Projected {
		// A projection is only worth drawing where it can be seen.
		t1 = math.Max(t1, float64(m.At.Add(time.Minute).Unix()))
	}
	if t1 <= t0 {
		t1 = t0 + 60
	}
	plots := make([][]*plot.Plot, len(p.Panels))
	for i := range p.Panels {
		pl, err := p.panelPlot(i, t0, t1)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{pl}
	}
	area := draw.Crop(dc, 0, -legendWidth, listH, -(titleHeight + stripHeight))
	tiles := plot.Align(plots, draw.Tiles{Rows: len(plots), Cols: 1, PadY: 6, PadLeft: 4}, area)
	for i, row := range plots {
		row[0].Draw(tiles[i][0])
		p.drawLegend(dc, tiles[i][0], p.Panels[i], row[0])
	}
	top := plots[0][0].DataCanvas(tiles[0][0])
	xOf, _ := plots[0][0].Transforms(&top)
	p.drawMarkStrip(dc, marks, xOf, top, t0, t1)
	drawMarkList(dc, marks, listH)
	_, err := c.WriteTo(w)
	return err
}

func textStyle(f font.Font, col color.Color) draw.TextStyle {
	return draw.TextStyle{Color: col, Font: f, Handler: plot.DefaultTextHandler}
}

// panelPlot builds panel i: its series with gaps kept, the incident span,
// reference levels, state changes and projections as vertical lines.
func (p *Plot) panelPlot(i int, t0, t1 float64) (*plot.Plot, error) {
	panel := p.Panels[i]
	pl := plot.New()
	pl.Title.Text = panel.Title
	pl.Title.TextStyle.Font = font.From(plot.DefaultFont, 10)
	pl.Title.TextStyle.XAlign = draw.XLeft
	pl.Title.Padding = 2
	pl.X.Min, pl.X.Max = t0, t1
	if i == len(p.Panels)-1 {
		pl.X.Tick.Marker = timeTicks{}
		pl.X.Label.Text = "UTC, " + time.Unix(int64(t0), 0).UTC().Format("2006-01-02")
		pl.X.Label.TextStyle.Font = textFont
	} else {
		// Same ticks, no labels: only the bottom panel names the times.
		pl.X.Tick.Marker = unlabelled{timeTicks{}}
	}
	pl.X.Tick.Label.Font, pl.Y.Tick.Label.Font = textFont, textFont
	pl.Y.Label.Text = panel.Unit
	pl.Y.Label.TextStyle.Font = textFont
	lo, hi := panel.yRange()
	pl.Y.Min, pl.Y.Max = lo, hi
	if panel.Log {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = decadeTicks{}
	} else {
		pl.Y.Tick.Marker = linearTicks{}
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe4}
	grid.Horizontal.Color = color.Gray{Y: 0xe4}
	pl.Add(grid)

	spanEnd := t1
	if !p.SpanEnd.IsZero() {
		spanEnd = math.Min(t1, float64(p.SpanEnd.Unix()))
	}
	if spanStart := math.Max(t0, float64(p.SpanStart.Unix())); spanEnd > spanStart {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: spanStart, Y: lo}, {X: spanEnd, Y: lo}, {X: spanEnd, Y: hi}, {X: spanStart, Y: hi}})
		if err != nil {
			return nil, err
		}
		poly.Color, poly.LineStyle.Width = spanColor, 0
		pl.Add(poly)
	}
	for _, m := range p.Marks {
		if x := float64(m.At.Unix()); x >= t0 && x <= t1 {
			pl.Add(vline(x, lo, hi, markColor, 0.5, nil))
		}
	}
	for _, m := range p.Projected {
		if x := float64(m.At.Unix()); x >= t0 && x <= t1 {
			pl.Add(vline(x, lo, hi, markColor, 1, []vg.Length{4, 3}))
		}
	}
	for _, lv := range panel.Levels {
		pl.Add(hline(lv.Value, t0, t1, parseColor(lv.Color)))
	}
	for _, s := range panel.Series {
		for _, run := range runs(p.Times, s.Values, panel.Log) {
			l, err := plotter.NewLine(run)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = parseColor(s.Color), 1.2
			if s.Dashed {
				l.Dashes = []vg.Length{3, 2}
			}
			pl.Add(l)
		}
	}
	return pl, nil
}

func vline(x, lo, hi float64, col color.Color, width vg.Length, dashes []vg.Length) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
	l.Color, l.Width, l.Dashes = col, width, dashes
	return l
}

func hline(y, t0, t1 float64, col color.Color) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: t0, Y: y}, {X: t1, Y: y}})
	l.Color, l.Width, l.Dashes = col, 1, []vg.Length{6, 3}
	return l
}

// runs splits a series at its gaps (NaN, ±Inf, non-positive on a log axis):
// a line is never drawn across a missing sample.
func runs(times []time.Time, values []float64, logAxis bool) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for j, v := range values {
		if j >= len(times) || math.IsNaN(v) || math.IsInf(v, 0) || (logAxis && v <= 0) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: float64(times[j].Unix()), Y: v})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// yRange is the panel's axis range: from 0 (or the lowest value) to a tick
// of the axis above the highest on a linear axis; whole decades that hold
// every value and level on a log axis.
func (panel Panel) yRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	see := func(v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || (panel.Log && v <= 0) {
			return
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	for _, s := range panel.Series {
		for _, v := range s.Values {
			see(v)
		}
	}
	for _, lv := range panel.Levels {
		see(lv.Value)
	}
	if panel.Log {
		if math.IsInf(lo, 1) {
			return 1e-12, 1e-6
		}
		dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if dhi <= dlo {
			dhi = dlo + 1
		}
		return math.Pow(10, dlo), math.Pow(10, dhi)
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	lo = math.Min(lo, 0)
	if hi <= lo {
		return lo, lo + 1
	}
	// 2% headroom: a flat series at its maximum is drawn under the
	// panel's frame, not on it.
	return tickedRange(lo, hi+0.02*(hi-lo))
}

// tickedRange widens [lo, hi] to end on ticks of gonum's DefaultTicks, the
// linear axis's ticker; see tickedEnd.
func tickedRange(lo, hi float64) (float64, float64) {
	hi = tickedEnd(lo, hi)
	if lo < 0 {
		lo = -tickedEnd(-hi, -lo)
	}
	return lo, hi
}

// tickedEnd is the top for an axis from lo up to at least hi: the lowest
// value DefaultTicks labels up to half the range again above hi (30 for data
// up to 20), else its next tick above hi, labelled or not. DefaultTicks only
// places ticks inside the range it is given, so each candidate top, a
// multiple of its smallest step, is tried in turn.
func tickedEnd(lo, hi float64) float64 {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	values := make([]float64, len(ticks))
	for i, tk := range ticks {
		values[i] = tk.Value
	}
	sort.Float64s(values)
	step := math.Inf(1)
	for i := 1; i < len(values); i++ {
		if d := values[i] - values[i-1]; d > 0 {
			step = math.Min(step, d)
		}
	}
	if math.IsInf(step, 1) {
		return hi
	}
	// Rounded to 12 digits: DefaultTicks leaves out a label at 0.1 when
	// the top is 0.09999999999999999.
	round := func(v float64) float64 {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
		return r
	}
	first := math.Ceil(hi/step - 1e-9)
	for k := first; k*step <= hi+(hi-lo)/2; k++ {
		top := round(k * step)
		for _, tk := range (plot.DefaultTicks{}).Ticks(lo, top) {
			if tk.Label != "" && math.Abs(tk.Value-top) <= 1e-9*(top-lo) {
				return tk.Value
			}
		}
	}
	return round(first * step)
}

// linearTicks is gonum's DefaultTicks with the trailing zeros of its labels
// cut: DefaultTicks writes all labels of an axis with one precision, and a
// 2.5 step adds two decimals to it, so 0..75 would read 0.00 25.00 50.00
// 75.00 and 0..1 would read 0.0 0.5 1.0.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		ticks[i].Label = trimZeros(ticks[i].Label)
	}
	return ticks
}

// trimZeros cuts the zeros after a fixed-point label's last significant
// decimal ("25.00" is "25", "0.50" is "0.5"); exponent labels ('g' format)
// have none.
func trimZeros(label string) string {
	if !strings.Contains(label, ".") || strings.ContainsAny(label, "eE") {
		return label
	}
	label = strings.TrimRight(strings.TrimRight(label, "0"), ".")
	if label == "-0" {
		return "0"
	}
	return label
}

// decadeTicks is gonum's LogTicks (a labelled tick on every power of ten,
// unlabelled ones at 2 to 9 times it) with three changes. Labels read 1e-9:
// LogTicks writes 1e-09. A decade's tick sits on the exact power of ten:
// LogTicks multiplies its way up the decades, so its ticks drift off them
// (9.999999999999999e-06), and one a hair above the axis's end would be left
// out with its label. Past 8 decades only every other decade is labelled and the ticks
// between decades are left out: more labels overlap in a panel's height,
// and 8 ticks a decade merge into a bar.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	// LogTicks starts at 10^int(log10(lo)), and int() rounds toward zero:
	// for lo = 1e-15, whose log10 is -14.999999999999998, it would start a
	// decade late and leave the bottom of the axis without a label.
	all := plot.LogTicks{}.Ticks(lo*(1-1e-9), hi)
	dlo, dhi := int(math.Ceil(math.Log10(lo)-1e-9)), int(math.Floor(math.Log10(hi)+1e-9))
	every := 1
	if dhi-dlo > 8 {
		every = 2
	}
	ticks := all[:0]
	for _, tk := range all {
		if tk.IsMinor() {
			if every == 1 {
				ticks = append(ticks, tk)
			}
			continue
		}
		d := int(math.Round(math.Log10(tk.Value)))
		tk = plot.Tick{Value: math.Pow10(d)}
		if d >= dlo && d <= dhi && (d-dlo)%every == 0 {
			tk.Label = "1e" + strconv.Itoa(d)
		}
		ticks = append(ticks, tk)
	}
	return ticks
}

// timeTicks places the data-time axis's ticks on round UTC times (whole
// minutes, 5 minutes, hours, ...), 4 to 8 of them, and has gonum's TimeTicks
// write their labels hh:mm, or hh:mm:ss under a minute's step. The placement
// stays here: TimeTicks takes its positions from another Ticker, by default
// DefaultTicks, which steps by 1, 2, 2.5, 3, 4 or 5 times a power of ten of
// the axis's values, here seconds since 1970, so that a 2h40m window gets
// 00:26:40, 01:33:20, 02:40:00 rather than whole half hours. gonum has no
// ticker that steps by minutes and hours.
type timeTicks struct{}

func (timeTicks) Ticks(t0, t1 float64) []plot.Tick {
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if (t1-t0)/s <= 7 {
			step = s
			break
		}
	}
	format := "15:04"
	if step < 60 {
		format = "15:04:05"
	}
	var at plot.ConstantTicks
	for v := math.Ceil(t0/step) * step; v <= t1; v += step {
		// Any label makes a tick major; TimeTicks writes the real one.
		at = append(at, plot.Tick{Value: v, Label: "t"})
	}
	return plot.TimeTicks{Ticker: at, Format: format, Time: plot.UTCUnixTime}.Ticks(t0, t1)
}

// unlabelled is a ticker's ticks without their labels: the same tick marks
// on a panel whose axis another panel names.
type unlabelled struct{ plot.Ticker }

func (u unlabelled) Ticks(lo, hi float64) []plot.Tick {
	ticks := u.Ticker.Ticks(lo, hi)
	for i := range ticks {
		ticks[i].Label = ""
	}
	return ticks
}

// drawLegend writes a panel's legend right of its data area.
func (p *Plot) drawLegend(dc draw.Canvas, tile draw.Canvas, panel Panel, pl *plot.Plot) {
	data := pl.DataCanvas(tile)
	x := tile.Max.X + 14
	y := data.Max.Y - fontSize
	entry := func(col color.Color, dashes []vg.Length, label string) {
		dc.StrokeLine2(draw.LineStyle{Color: col, Width: 1.5, Dashes: dashes}, x, y+3, x+18, y+3)
		dc.FillText(textStyle(textFont, color.Black), vg.Point{X: x + 24, Y: y}, label)
		y -= fontSize + 4
	}
	for _, s := range panel.Series {
		var dashes []vg.Length
		if s.Dashed {
			dashes = []vg.Length{3, 2}
		}
		entry(parseColor(s.Color), dashes, s.Name)
	}
	for _, lv := range panel.Levels {
		entry(parseColor(lv.Color), []vg.Length{6, 3}, lv.Name)
	}
	if len(p.Projected) > 0 && panel.Log {
		for _, m := range p.Projected {
			entry(markColor, []vg.Length{4, 3}, m.Label)
		}
	}
}

// drawMarkStrip numbers the state changes above the first panel. Changes
// closer than a label's width share one label ("4-9"); labels that would
// still touch move to a second row. The list under the plot says what each
// number is.
func (p *Plot) drawMarkStrip(dc draw.Canvas, marks []Mark, xOf func(float64) vg.Length, top draw.Canvas, t0, t1 float64) {
	sty := textStyle(font.From(plot.DefaultFont, 8), markColor)
	sty.XAlign = draw.XCenter
	type group struct {
		first, last int
		x0, x1      vg.Length
	}
	var groups []group
	minGap := sty.Width("00") + 2
	for i, m := range marks {
		v := float64(m.At.Unix())
		if v < t0 || v > t1 {
			continue
		}
		x := xOf(v)
		if n := len(groups); n > 0 && x-groups[n-1].x0 < minGap {
			groups[n-1].last, groups[n-1].x1 = i, x
			continue
		}
		groups = append(groups, group{first: i, last: i, x0: x, x1: x})
	}
	const rows = 2
	lastEnd := [rows]vg.Length{-1e9, -1e9}
	for _, g := range groups {
		label := strconv.Itoa(g.first + 1)
		if g.last > g.first {
			label += "-" + strconv.Itoa(g.last+1)
		}
		x := (g.x0 + g.x1) / 2
		w := sty.Width(label) + 4
		row := 0
		if x-w/2 < lastEnd[0] {
			row = 1
		}
		lastEnd[row] = x + w/2
		y := top.Max.Y + 4 + vg.Length(row)*9
		for k := g.first; k <= g.last; k++ {
			if v := float64(marks[k].At.Unix()); v >= t0 && v <= t1 {
				dc.StrokeLine2(draw.LineStyle{Color: markColor, Width: 0.5}, xOf(v), top.Max.Y, xOf(v), top.Max.Y+3)
			}
		}
		dc.FillText(sty, vg.Point{X: x, Y: y}, label)
	}
}

// drawMarkList explains the numbered ticks under the plot, in columns.
func drawMarkList(dc draw.Canvas, marks []Mark, listH vg.Length) {
	if len(marks) == 0 {
		return
	}
	rowsPerCol := (len(marks) + listCols - 1) / listCols
	colW := vg.Length(plotWidth-16) / listCols
	sty := textStyle(textFont, color.Black)
	for i, m := range marks {
		col, row := i/rowsPerCol, i%rowsPerCol
		pt := vg.Point{X: 8 + vg.Length(col)*colW, Y: listH - vg.Length((row+1)*listRowH)}
		dc.FillText(sty, pt, fmt.Sprintf("%d  %s  %s", i+1, m.At.UTC().Format("15:04:05"), m.Label))
	}
}

func parseColor(s string) color.Color {
	var r, g, b uint8
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return color.Black
	}
	return color.NRGBA{R: r, G: g, B: b, A: 0xff}
}
