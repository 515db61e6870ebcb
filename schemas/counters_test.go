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

// TestKindOf holds the widths the kernel gives each counter (the sources are
// named beside portCounterKinds and hw64).
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		src  Source
		name string
		want Kind
	}{
		{SourceCounters, "symbol_error", Sat16},
		{SourceCounters, "link_downed", Sat8},
		{SourceCounters, "local_link_integrity_errors", Sat4},
		{SourceCounters, "port_xmit_wait", Sat32},
		{SourceCounters, "port_rcv_data", Ext64Sat32},
		{SourceCounters, "port_xmit_packets", Ext64Sat32},
		{SourceCounters, "unicast_rcv_packets", Counter64},
		{SourceHWCounters, "out_of_buffer", Wrap32},
		{SourceHWCounters, "out_of_sequence", Wrap32},
		{SourceHWCounters, "rq_num_oos", Wrap32},
		// 21,278,189,006 read on a real ConnectX-6 Dx port: 64-bit.
		{SourceHWCounters, "np_ecn_marked_roce_packets", Counter64},
		{SourceHWCounters, "rp_cnp_handled", Counter64},
		{SourceHWCounters, "cc_rx_ce_pkts", Counter64},
		{SourceHWCounters, "lifespan", Gauge},
		{SourceEthtool, "rx_global_pause_duration", Counter64},
		// The collector's member count on a LAG's sample, not a statistic.
		{SourceEthtool, GaugeLAGMembers, Gauge},
		{SourceHWCounters, GaugeLAGMembers, Wrap32},
	} {
		if got := KindOf(tc.src, tc.name); got != tc.want {
			t.Errorf("KindOf(%v, %q) = %v, want %v", tc.src, tc.name, got, tc.want)
		}
	}
	if Sat16.Max() != 65535 || Sat8.Max() != 255 || Sat4.Max() != 15 || Wrap32.Max() != 1<<32-1 || Sat32.Max() != 1<<32-1 {
		t.Errorf("maxima wrong")
	}
}

func TestKindPinned(t *testing.T) {
	for _, tc := range []struct {
		kind  Kind
		value uint64
		want  bool
	}{
		{Sat16, 65535, true},
		{Sat16, 65534, false},
		{Sat32, 1<<32 - 1, true},
		{Ext64Sat32, 1<<32 - 1, true},
		{Ext64Sat32, 1 << 32, false},
		{Ext64Sat32, 1<<32 - 2, false},
		{Wrap32, 1<<32 - 1, false},
		{Counter64, 1<<32 - 1, false},
	} {
		if got := tc.kind.Pinned(tc.value); got != tc.want {
			t.Errorf("%v.Pinned(%d) = %v, want %v", tc.kind, tc.value, got, tc.want)
		}
	}
}
