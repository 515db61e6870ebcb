package processor

import (
	"math"
	"testing"
)

func TestFigures(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"finite keeps a number", Finite(-2.5), -2.5},
		{"finite NaN", Finite(nan), 0},
		{"finite +Inf", Finite(inf), 0},
		{"finite -Inf", Finite(-inf), 0},
		{"roundTo 2", RoundTo(0.12549, 2), 0.13},
		{"roundTo 3", RoundTo(2.00049, 3), 2},
		{"roundTo negative", RoundTo(-1.2345, 3), -1.235},
		{"roundTo 0 places", RoundTo(41.5, 0), 42},
		{"roundTo NaN", RoundTo(nan, 2), 0},
		{"roundTo Inf", RoundTo(inf, 2), 0},
		{"roundTo huge", RoundTo(1e307, 3), 1e307},
		{"sigDigits 3", SigDigits(123456, 3), 123000},
		{"sigDigits 4 small", SigDigits(1.23456e-12, 4), 1.235e-12},
		{"sigDigits negative", SigDigits(-0.0098765, 3), -0.00988},
		{"sigDigits 0", SigDigits(0, 3), 0},
		{"sigDigits NaN", SigDigits(nan, 3), 0},
		{"sigDigits -Inf", SigDigits(-inf, 4), 0},
		{"sigDigits subnormal", SigDigits(5e-324, 3), 5e-324},
		{"sigDigits max", SigDigits(math.MaxFloat64, 3), math.MaxFloat64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want && math.Abs(tt.got-tt.want) > 1e-12*math.Abs(tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}
