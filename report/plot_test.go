package report

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.svg from the code")

// majorLabels are a ticker's labels, minor ticks left out.
func majorLabels(ticks []plot.Tick) string {
	var labels []string
	for _, tk := range ticks {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	return strings.Join(labels, " ")
}

func TestLinearTicksAreRound(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 1, "0 0.5 1"},
		{0, 150, "0 50 100 150"},
		{0, 75, "0 25 50 75"},
		{0, 4000, "0 2000 4000"},
		{0, 0.3, "0 0.15 0.3"},
		{0, 5.4e-5, "0 2.5e-05 5e-05"},
		{-10, 10, "-10 0 10"},
	} {
		if got := majorLabels((linearTicks{}).Ticks(tc.lo, tc.hi)); got != tc.want {
			t.Errorf("linearTicks(%g, %g) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestTrimZeros(t *testing.T) {
	for in, want := range map[string]string{
		"25.00": "25", "0.50": "0.5", "0.0": "0", "-0.0": "0", "1000": "1000",
		"2.5e-05": "2.5e-05", "1e+06": "1e+06", "-2.50": "-2.5",
	} {
		if got := trimZeros(in); got != want {
			t.Errorf("trimZeros(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestYRangeIsRound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		panel  Panel
		lo, hi float64
	}{
		{"gbps", Panel{Series: []Series{{Values: []float64{3, 97.3, math.NaN()}}}}, 0, 100},
		{"fraction", Panel{Series: []Series{{Values: []float64{0, 0.997}}}}, 0, 1.5},
		{"throughput", Panel{Series: []Series{{Values: []float64{0.4, 0.8}}}}, 0, 1},
		{"flat at a label", Panel{Series: []Series{{Values: []float64{20, 20}}}}, 0, 30},
		{"negative", Panel{Series: []Series{{Values: []float64{-9.3, 9.3}}}}, -12, 12},
		{"empty", Panel{}, 0, 1},
		{"ber within a decade", Panel{Log: true, Series: []Series{{Values: []float64{2e-9, 8e-9, 0}}}}, 1e-9, 1e-8},
		{"ber with its critical level", Panel{Log: true, Series: []Series{{Values: []float64{2e-9}}}, Levels: []Level{{Value: 1e-6}}}, 1e-9, 1e-6},
	} {
		lo, hi := tc.panel.yRange()
		if math.Abs(lo-tc.lo) > 1e-9*math.Abs(tc.lo)+1e-300 || math.Abs(hi-tc.hi) > 1e-9*math.Abs(tc.hi) {
			t.Errorf("%s: range [%g, %g], want [%g, %g]", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestLinearRangeTopIsLabelled: the axis's top is above the data by at most
// half the range again, and nearly always one of its ticker's labels.
func TestLinearRangeTopIsLabelled(t *testing.T) {
	labelled := 0
	const n = 2000
	for i := 1; i <= n; i++ {
		top := float64(i) * 0.0137
		lo, hi := tickedRange(0, top)
		if lo != 0 || hi < top || hi > 1.5*top+1e-9 {
			t.Fatalf("tickedRange(0, %g) = [%g, %g]", top, lo, hi)
		}
		for _, tk := range (linearTicks{}).Ticks(lo, hi) {
			if tk.Label != "" && math.Abs(tk.Value-hi) <= 1e-9*hi {
				labelled++
			}
		}
	}
	t.Logf("%d of %d tops labelled", labelled, n)
	if labelled < n*9/10 {
		t.Errorf("%d of %d tops labelled, want at least 90%%", labelled, n)
	}
}

func TestDecadeTicksNeverRepeatALabel(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{1e-9, 1e-8, "1e-9 1e-8"},
		{1e-12, 1e-6, "1e-12 1e-11 1e-10 1e-9 1e-8 1e-7 1e-6"},
		{1e-15, 1e-3, "1e-15 1e-13 1e-11 1e-9 1e-7 1e-5 1e-3"},
		{1e-6, 1e-2, "1e-6 1e-5 1e-4 1e-3 1e-2"},
	} {
		ticks := (decadeTicks{}).Ticks(tc.lo, tc.hi)
		if got := majorLabels(ticks); got != tc.want {
			t.Errorf("range %g..%g: %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
		for _, tk := range ticks {
			if tk.Label == "" {
				continue
			}
			if math.Pow10(int(math.Round(math.Log10(tk.Value)))) != tk.Value {
				t.Errorf("range %g..%g: label %s on %g, not a power of ten", tc.lo, tc.hi, tk.Label, tk.Value)
			}
		}
	}
}

func TestTimeTicksAreRound(t *testing.T) {
	t0 := float64(time.Date(2026, 3, 14, 0, 0, 7, 0, time.UTC).Unix())
	for _, tc := range []struct {
		span time.Duration
		want string
	}{
		{11 * time.Minute, "00:02 00:04 00:06 00:08 00:10"},
		{2*time.Hour + 40*time.Minute, "00:30 01:00 01:30 02:00 02:30"},
		{40 * time.Second, "00:00:10 00:00:20 00:00:30 00:00:40"},
		{30 * time.Hour, "06:00 12:00 18:00 00:00 06:00"},
	} {
		ticks := (timeTicks{}).Ticks(t0, t0+tc.span.Seconds())
		if got := majorLabels(ticks); got != tc.want {
			t.Errorf("span %s: %q, want %q", tc.span, got, tc.want)
		}
		if got := majorLabels((unlabelled{timeTicks{}}).Ticks(t0, t0+tc.span.Seconds())); got != "" || len(ticks) == 0 {
			t.Errorf("span %s: unlabelled ticks have labels %q", tc.span, got)
		}
	}
}

// TestPlotGolden pins the SVG of a BER drift plot with many close state
// changes: a change to the layout shows as a diff to review (render it with
// rsvg-convert and look), then -update.
func TestPlotGolden(t *testing.T) {
	base := time.Date(2026, 3, 14, 1, 0, 0, 0, time.UTC)
	var times []time.Time
	var ber, rcv []float64
	for i := range 120 {
		times = append(times, base.Add(time.Duration(i)*time.Minute))
		ber = append(ber, 3e-9*math.Pow(10, float64(i)/40))
		v := 40 + 10*math.Sin(float64(i)/5)
		if i == 60 {
			v = math.NaN() // a gap
		}
		rcv = append(rcv, v)
	}
	p := &Plot{
		Title:     "ber_drift on gpu-005/mlx5_0/1",
		Times:     times,
		SpanStart: base.Add(30 * time.Minute),
		Panels: []Panel{
			{Title: "Bit error rate", Log: true, Series: []Series{{Name: "pre-FEC BER", Color: colorBER, Values: ber}},
				Levels: []Level{{Name: "critical pre-FEC BER 1e-6", Value: 1e-6, Color: colorCritical}}},
			{Title: "Throughput", Unit: "Gb/s", Series: []Series{{Name: "received", Color: colorRcv, Values: rcv}}},
		},
		// What postmortem draws for a drift that crossed: the observed
		// crossing and the projection the open announced.
		Projected: []Mark{{At: base.Add(100*time.Minute + 54*time.Second), Label: "observed crossing 02:40:54"},
			{At: base.Add(115 * time.Minute), Label: "projected when announced 02:55"}},
	}
	for i := range 9 {
		state := "update"
		if i == 0 {
			state = "open"
		}
		p.Marks = append(p.Marks, Mark{At: base.Add(40*time.Minute + time.Duration(i)*20*time.Second), Label: state})
	}
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "ber_drift.golden.svg")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./report -run PlotGolden -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("plot differs from %s: render both with rsvg-convert, look, then go test ./report -run PlotGolden -update", golden)
	}
	for _, label := range []string{"1e-9", "1e-6", "critical pre-FEC BER 1e-6", "observed crossing 02:40:54", "projected when announced 02:55", "01:30", "02:00", "9  01:42:40  update"} {
		if !bytes.Contains(buf.Bytes(), []byte(label)) {
			t.Errorf("plot lacks %q", label)
		}
	}
}
