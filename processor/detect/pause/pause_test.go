package pause

import "testing"

func TestRateGbps(t *testing.T) {
	tests := []struct {
		text string
		want float64
	}{
		{"100 Gb/sec (4X EDR)", 100},
		{"", 0},
	}
	for _, tt := range tests {
		if got := rateGbps(tt.text); got != tt.want {
			t.Errorf("rateGbps(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
