package schemas

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// go test -run '^$' -fuzz '^FuzzTrimStatName$' -fuzztime 60s ./schemas
func FuzzTrimStatName(f *testing.F) {
	for _, s := range []string{"tx_pause_storm_warning_events ", " rx_prio3_pause", "", "\t\n", "rx\u00a0x", "\u0145"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := TrimStatName(s)
		if TrimStatName(got) != got {
			t.Fatalf("TrimStatName(%q) = %q is not idempotent", s, got)
		}
		first, _ := utf8.DecodeRuneInString(got)
		last, _ := utf8.DecodeLastRuneInString(got)
		if got != "" && (unicode.IsSpace(first) || unicode.IsSpace(last)) {
			t.Fatalf("TrimStatName(%q) = %q keeps white space at an end", s, got)
		}
		if !strings.Contains(s, got) {
			t.Fatalf("TrimStatName(%q) = %q is not a part of its input", s, got)
		}
	})
}
