package altgen

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Under every NIC profile one seed gives the same faults (labels equal but
// for a bond's device names), and the readings list what the profile's
// driver lists.
func TestNICProfiles(t *testing.T) {
	type sample struct {
		Device   string            `json:"device"`
		Netdev   string            `json:"netdev"`
		Counters map[string]uint64 `json:"counters"`
		Ethtool  map[string]uint64 `json:"ethtool"`
		Config   *struct {
			PFC *[]int `json:"pfc_enabled"`
		} `json:"config"`
	}
	read := func(t *testing.T, nic string) (labels []string, samples []sample) {
		cfg, err := Preset("pfc", 2, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Without noise: no statistic lost to a read glitch.
		cfg.NIC, cfg.Duration, cfg.Noise = nic, 12*time.Minute, false
		dir := t.TempDir()
		if err := Generate(cfg, dir, false); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "labels.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			labels = append(labels, strings.ReplaceAll(l, "mlx5_bond_", "mlx5_"))
		}
		f, err := os.Open(filepath.Join(dir, "trace.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var s sample
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			if s.Device != "" {
				samples = append(samples, s)
			}
		}
		return labels, samples
	}
	fullLabels, _ := read(t, NICFull)
	tests := []struct {
		nic       string
		want, not []string // on the ordinary (or bond) RoCE samples with ethtool
		members   bool
		pfcEmpty  bool
	}{
		{NICFull, []string{"rx_bits_phy", "rx_corrected_bits_phy"}, []string{"rx_symbol_err_phy", "tx_global_pause", lagMembers}, false, false},
		{NICUpstream, []string{"rx_corrected_bits_phy", "rx_symbol_err_phy", "rx_crc_errors_phy"}, []string{"rx_bits_phy", "tx_global_pause", lagMembers}, false, false},
		{NICGlobalPause, []string{"tx_global_pause", "rx_global_pause_duration", "rx_global_pause_transition"}, []string{"rx_bits_phy", "tx_prio0_pause", "rx_prio5_pause_duration", "tx_prio3_pause", lagMembers}, false, true},
		{NICBonded, []string{"rx_discards_phy", lagMembers}, []string{"rx_bits_phy", "rx_corrected_bits_phy", "link_down_events_phy"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.nic, func(t *testing.T) {
			labels, samples := read(t, tt.nic)
			if strings.Join(labels, "\n") != strings.Join(fullLabels, "\n") {
				t.Errorf("labels differ from the full profile's:\n%s\nwant\n%s", strings.Join(labels, "\n"), strings.Join(fullLabels, "\n"))
			}
			var members, checked, pfcEmpty int
			for _, s := range samples {
				if strings.Contains(s.Device, ".") {
					members++
					if s.Counters != nil || s.Ethtool["rx_corrected_bits_phy"] == 0 && len(s.Ethtool) < 5 {
						t.Fatalf("member sample %s: counters %v ethtool %v", s.Device, s.Counters, s.Ethtool)
					}
					for k := range s.Ethtool {
						if !phyStat(k) {
							t.Fatalf("member sample %s lists %s", s.Device, k)
						}
					}
					continue
				}
				if s.Config != nil && s.Config.PFC != nil && len(*s.Config.PFC) == 0 {
					pfcEmpty++
				}
				if _, ok := s.Ethtool[lagMembers]; ok != strings.HasPrefix(s.Device, "mlx5_bond_") || ok && s.Ethtool[lagMembers] != bondLinks {
					t.Fatalf("%s: %s %d, want %d on a bond's line only", s.Device, lagMembers, s.Ethtool[lagMembers], bondLinks)
				}
				if len(s.Ethtool) < 8 || tt.members && !strings.HasPrefix(s.Device, "mlx5_bond_") {
					continue // no ethtool collected, read glitches, or an unbonded host
				}
				checked++
				for _, n := range tt.want {
					if _, ok := s.Ethtool[n]; !ok {
						t.Fatalf("%s lists no %s: %v", s.Device, n, s.Ethtool)
					}
				}
				for _, n := range tt.not {
					if _, ok := s.Ethtool[n]; ok {
						t.Fatalf("%s lists %s", s.Device, n)
					}
				}
			}
			if checked == 0 || (members > 0) != tt.members || (pfcEmpty > 0) != tt.pfcEmpty {
				t.Errorf("%d samples checked, %d member samples, %d with pfc_enabled []", checked, members, pfcEmpty)
			}
		})
	}
}
