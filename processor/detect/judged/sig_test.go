package judged

import "testing"

func TestSig(t *testing.T) {
	if got := sig(3456); got != 3460 {
		t.Errorf("sig(3456) = %v, want 3460", got)
	}
}
