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
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.svg from the code")

func TestLinearTicksAreRound(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 1, "0 0.25 0.5 0.75 1"},
		{0, 150, "0 50 100 150"},
		{0, 4000, "0 1000 2000 3000 4000"},
		{0, 0.3, "0 0.1 0.2 0.3"},
		{0, 5.4e-5, "0 2e-05 4e-05"},
		{-10, 10, "-10 -5 0 5 10"},
	} {
		var labels []string
		for _, tk := range linearTicks(tc.lo, tc.hi) {
			labels = append(labels, tk.Label)
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("linearTicks(%g, %g) = %q, want %q", tc.lo, tc.hi, got, tc.want)
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
		{"fraction", Panel{Series: []Series{{Values: []float64{0, 0.997}}}}, 0, 1.25},
		{"empty", Panel{}, 0, 1},
		{"ber within a decade", Panel{Log: true, Series: []Series{{Values: []float64{2e-9, 8e-9, 0}}}}, 1e-9, 1e-8},
		{"ber with its critical level", Panel{Log: true, Series: []Series{{Values: []float64{2e-9}}}, Levels: []Level{{Value: 1e-6}}}, 1e-9, 1e-6},
	} {
		lo, hi := tc.panel.yRange()
		if math.Abs(lo-tc.lo) > 1e-15*math.Abs(tc.lo)+1e-300 || math.Abs(hi-tc.hi) > 1e-9*math.Abs(tc.hi) {
			t.Errorf("%s: range [%g, %g], want [%g, %g]", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestDecadeTicksNeverRepeatALabel(t *testing.T) {
	for _, r := range [][2]float64{{1e-9, 1e-8}, {1e-12, 1e-6}, {1e-15, 1e-3}} {
		seen := map[string]bool{}
		n := 0
		for _, tk := range (decadeTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			n++
			if seen[tk.Label] {
				t.Errorf("range %g..%g: label %s twice", r[0], r[1], tk.Label)
			}
			seen[tk.Label] = true
			if d := math.Log10(tk.Value); math.Abs(d-math.Round(d)) > 1e-9 {
				t.Errorf("range %g..%g: label %s on %g, not a decade", r[0], r[1], tk.Label, tk.Value)
			}
		}
		if n < 2 {
			t.Errorf("range %g..%g: %d labels", r[0], r[1], n)
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
	} {
		var labels []string
		for _, tk := range timeTicks(t0, t0+tc.span.Seconds()) {
			labels = append(labels, tk.Label)
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("span %s: %q, want %q", tc.span, got, tc.want)
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
