package schemas

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseRateGbps(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"200 Gb/sec (4X HDR)", 200, true},
		{"40 Gb/sec (4X QDR)", 40, true},
		{"25 Gb/sec (1X EDR)", 25, true},
		{"2.5 Gb/sec (1X SDR)", 2.5, true},
		{"400 Gb/sec (4X NDR)\n", 400, true},
		{"100 Gb/sec", 100, true},
		{"", 0, false},
		{"Invalid argument", 0, false},
		{"fast Gb/sec", 0, false},
		{"10 Mb/sec", 0, false},
		{"10 Gb/secs", 0, false},
		{"-1 Gb/sec", 0, false},
		{"NaN Gb/sec", 0, false},
		{"Inf Gb/sec", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRateGbps(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("ParseRateGbps(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
				t.Errorf("error %q does not quote the rate text", err)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseRateGbps("200 Gb/sec (4X HDR)") }); n != 0 {
		t.Errorf("%v allocations per parse, want 0 (detectors parse per sample)", n)
	}
}

func FuzzParseRateGbps(f *testing.F) {
	for _, s := range []string{"200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)", "", "1e308 Gb/sec", "0x10 Gb/sec"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRateGbps(s)
		if err != nil {
			if v != 0 {
				t.Fatalf("ParseRateGbps(%q) = %v with error %v", s, v, err)
			}
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e6 {
			t.Fatalf("ParseRateGbps(%q) = %v", s, v)
		}
	})
}
