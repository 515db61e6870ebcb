package collector

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestDecodeDCBDSCPMap(t *testing.T) {
	partial := mlx5DSCPApps()[:63]
	twice := append(mlx5DSCPApps(), dcbAppBytes(dcbAttrIEEEApp, dcbAppSelDSCP, 5, 26))
	tests := []struct {
		name string
		apps [][]byte
		want map[int]int // dscp -> prio checked; nil: map unknown
	}{
		{"mlx5 full map", mlx5DSCPApps(), map[int]int{0: 0, 26: 3, 48: 6, 63: 0}},
		{"63 of 64 DSCPs: unknown", partial, nil},
		{"a DSCP on two priorities: unknown", twice, nil},
		{"no DSCP entries (trust pcp)", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := dcbReplyBytes(7, ifnameAttr("ens1f0np0"), nested(dcbAttrIEEE, nested(dcbAttrIEEEAppTable, tc.apps...)))
			cfg, done, err := decodeDCBReply(in, 7)
			if err != nil || !done {
				t.Fatalf("decode: done %v err %v", done, err)
			}
			if tc.want == nil {
				if cfg.dscpPrio != nil {
					t.Fatalf("map %v, want unknown", *cfg.dscpPrio)
				}
				return
			}
			if cfg.dscpPrio == nil || len(*cfg.dscpPrio) != 64 {
				t.Fatalf("map %v, want 64 entries", cfg.dscpPrio)
			}
			for d, p := range tc.want {
				if got := (*cfg.dscpPrio)[d]; got != p {
					t.Errorf("DSCP %d -> %d, want %d", d, got, p)
				}
			}
		})
	}
}

func TestParseTrafficClass(t *testing.T) {
	tests := []struct {
		in      string
		want    int // -1: none
		wantErr string
	}{
		{"Global tclass=106\n", 106, ""},
		{"Global tclass=0\n", 0, ""},
		{"Global tclass=255", 255, ""},
		{"", -1, ""},
		{"\n", -1, ""},
		{"Global tclass=106\ntclass=96,dst_ip=10.0.0.0/8\n", 106, ""},
		{"tclass=96,dst_ip=10.0.0.0/8\n", -1, ""},
		{"Global tclass=256\n", 0, "above 255"},
		{"Global tclass=-1\n", 0, "negative"},
		{"Global tclass=\n", 0, "empty"},
		{"Global class=3\n", 0, "is not"},
	}
	for _, tc := range tests {
		got, err := parseTrafficClass("tc/1/traffic_class", []byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "tc/1/traffic_class") {
				t.Errorf("%q: %v, %v; want an error naming the file with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || (tc.want < 0) != (got == nil) || (got != nil && *got != tc.want) {
			t.Errorf("%q: %v, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseTrafficClass(f *testing.F) {
	for _, s := range []string{"Global tclass=106\n", "", "Global tclass=999", "tclass=1,dst_ip=::/0\n", "Global tclass=+1", "Global\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseTrafficClass("p", b)
		if err == nil && got != nil && (*got < 0 || *got > 255) {
			t.Fatalf("%q gave traffic class %d", b, *got)
		}
		if err != nil && got != nil {
			t.Fatalf("%q: a value and an error", b)
		}
	})
}

func TestParseBondSlaves(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"ens1f0np0 ens1f1np1\n", "ens1f0np0,ens1f1np1", ""},
		{"ens1f0np0\n", "ens1f0np0", ""},
		{"\n", "", ""},
		{"", "", ""},
		{"a  b\n", "", "member 2"},
		{"a/b\n", "", "not a netdev name"},
		{"a a\n", "", "twice"},
		{strings.Repeat("x ", 17) + "\n", "", "at most 16"},
	}
	for _, tc := range tests {
		got, err := parseBondSlaves("bond0/bonding/slaves", []byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "bond0/bonding/slaves") {
				t.Errorf("%q: %v, %v; want an error naming the file with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%q: %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseBondSlaves(f *testing.F) {
	for _, s := range []string{"ens1f0np0 ens1f1np1\n", "", "a  b", "a\nb", "eth0.100 eth1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseBondSlaves("p", b)
		if err != nil {
			return
		}
		if len(got) > maxBondMembers {
			t.Fatalf("%d members", len(got))
		}
		for _, m := range got {
			if !validNetdevName(m) {
				t.Fatalf("%q accepted as a member", m)
			}
		}
	})
}

func TestIsPHYStat(t *testing.T) {
	phy := []string{"rx_bits_phy", "rx_corrected_bits_phy", "rx_pcs_symbol_err_phy", "rx_symbol_err_phy", "rx_crc_errors_phy",
		"rx_err_lane_0_phy", "rx_err_lane_3_phy", "link_down_events_phy", "rx_fragments_phy", "rx_jabbers_phy", "module_unplug", "module_high_temp"}
	summed := []string{"rx_discards_phy", "tx_discards_phy", "rx_packets_phy", "tx_bytes_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
		"rx_prio3_pause", "tx_prio3_pause_duration", "rx_global_pause", "rx_out_of_buffer", "rx_oversize_pkts_phy", "rx_prio3_bytes", "tx_pause_storm_warning_events"}
	for _, n := range phy {
		if !schemas.BondMemberStat(n) {
			t.Errorf("%s: want per member (physical layer)", n)
		}
	}
	for _, n := range summed {
		if schemas.BondMemberStat(n) {
			t.Errorf("%s: want summed over the members", n)
		}
	}
	if got := memberRate(100000); got != "100 Gb/sec" {
		t.Errorf("memberRate(100000) = %q", got)
	}
	if got := memberRate(2500); got != "2.5 Gb/sec" {
		t.Errorf("memberRate(2500) = %q", got)
	}
	if got := memberRate(-1); got != "" {
		t.Errorf("memberRate(-1) = %q", got)
	}
}
