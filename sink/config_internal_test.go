package sink

import "testing"

// A flush goes in one INSERT block unless BlockRows is set lower: the block
// bound follows the flush size.
func TestBlockRowsFollowBatchRows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		wantBlock int
	}{
		{"defaults", Config{}, 2 * DefaultBatchRows},
		{"larger flushes", Config{BatchRows: 200_000}, 400_000},
		{"small flushes", Config{BatchRows: 1000}, 2000},
		{"set", Config{BatchRows: 1000, BlockRows: 16}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.withDefaults().BlockRows; got != tc.wantBlock {
				t.Errorf("BlockRows %d, want %d", got, tc.wantBlock)
			}
		})
	}
}
