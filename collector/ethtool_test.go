package collector

import (
	"bufio"
	"errors"
	"maps"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ethtoolTestNetdev returns the interface of the default route, else the
// first non-loopback interface that is up, else "".
func ethtoolTestNetdev() string {
	if f, err := os.Open("/proc/net/route"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// Iface Destination Gateway ...: destination 0 is the default.
			if len(fields) > 1 && fields[1] == "00000000" && validNetdevName(fields[0]) {
				return fields[0]
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 {
			return i.Name
		}
	}
	return ""
}

func TestEthtoolRealNetdev(t *testing.T) {
	netdev := ethtoolTestNetdev()
	if netdev == "" {
		t.Skip("no default-route or up non-loopback interface on this machine to read ethtool statistics from")
	}
	r, err := NewEthtoolReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stats, err := r.Stats(netdev)
	if errors.Is(err, syscall.EOPNOTSUPP) {
		t.Skipf("the driver of %s has no ethtool statistics: %v", netdev, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) == 0 {
		t.Fatalf("ethtool -S %s returned no statistics", netdev)
	}
	for name := range stats {
		if name == "" || name != strings.TrimSpace(name) {
			t.Errorf("stat name %q is not trimmed", name)
		}
	}
	t.Logf("%s: %d statistics", netdev, len(stats))

	// The same handle serves the next scrape.
	again, err := r.Stats(netdev)
	if err != nil || len(again) != len(stats) {
		t.Fatalf("second read: %d stats, err %v; first read had %d", len(again), err, len(stats))
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := r.Stats(netdev); !errors.Is(err, ErrEthtoolClosed) || !strings.Contains(err.Error(), netdev) {
		t.Fatalf("Stats after Close: err = %v, want ErrEthtoolClosed naming %s", err, netdev)
	}
}

func TestEthtoolErrorsNameNetdev(t *testing.T) {
	r, err := NewEthtoolReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		netdev string
		errno  error // nil: rejected before the ioctl
	}{
		{netdev: "rwnone0", errno: syscall.ENODEV},
		{netdev: "lo", errno: syscall.EOPNOTSUPP}, // loopback has no statistics
		{netdev: "a-name-far-too-long-for-ifnamsiz"},
		{netdev: ""},
		{netdev: "../eth0"},
	}
	for _, tc := range tests {
		t.Run(tc.netdev, func(t *testing.T) {
			_, err := r.Stats(tc.netdev)
			if err == nil {
				t.Fatalf("Stats(%q) succeeded, want an error", tc.netdev)
			}
			if !strings.Contains(err.Error(), `netdev `+tc.netdev) && !strings.Contains(err.Error(), `netdev "`+tc.netdev+`"`) {
				t.Errorf("error %q does not name netdev %q", err, tc.netdev)
			}
			if tc.errno != nil && !errors.Is(err, tc.errno) {
				t.Errorf("error %v is not %v", err, tc.errno)
			}
		})
	}
}

func TestEthtoolTrimStatNames(t *testing.T) {
	tests := []struct {
		name string
		raw  map[string]uint64
		want map[string]uint64
	}{
		{name: "clean", raw: map[string]uint64{"rx_pause_ctrl_phy": 3}, want: map[string]uint64{"rx_pause_ctrl_phy": 3}},
		{name: "trailing space of older mlx5",
			raw:  map[string]uint64{"tx_pause_storm_warning_events ": 2, "rx_prio3_pause": 5},
			want: map[string]uint64{"tx_pause_storm_warning_events": 2, "rx_prio3_pause": 5}},
		{name: "both spellings: trimmed one wins",
			raw:  map[string]uint64{"tx_pause_storm_warning_events ": 2, "tx_pause_storm_warning_events": 7},
			want: map[string]uint64{"tx_pause_storm_warning_events": 7}},
		{name: "blank name dropped", raw: map[string]uint64{" ": 1, "a": 1}, want: map[string]uint64{"a": 1}},
		{name: "empty", raw: map[string]uint64{}, want: map[string]uint64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Map order is random: repeat so both orders of a duplicate
			// are seen.
			for range 20 {
				got := trimEthtoolStatNames(tc.raw)
				if len(got) != len(tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				for k, v := range tc.want {
					if got[k] != v {
						t.Fatalf("got %v, want %v", got, tc.want)
					}
				}
			}
		})
	}
}

func TestEthtoolValidNetdevName(t *testing.T) {
	for name, want := range map[string]bool{
		"eth0":             true,
		"ens1f0np0":        true,
		"bond0.100":        true,
		"ib0":              true,
		"":                 false,
		".":                false,
		"..":               false,
		"a/b":              false,
		"eth 0":            false,
		"fifteen-chars-x":  true,
		"sixteen-chars-xx": false,
		"a:b":              false,
	} {
		if got := validNetdevName(name); got != want {
			t.Errorf("validNetdevName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzEthtoolTrimStatNames: names come from the driver (issue 8.14). The
// result must be trimmed, cover every non-blank name, prefer the trimmed
// spelling, and not depend on the map's order.
func FuzzEthtoolTrimStatNames(f *testing.F) {
	for _, s := range []string{
		"rx_pause_ctrl_phy",
		"tx_pause_storm_warning_events \x00tx_pause_storm_warning_events",
		"a \x00 a\x00a\t",
		" \x00\x00\t\n",
		"rx_prio3_pause\x00tx_prio3_pause\x00rx_corrected_bits_phy \x00\u00a0x\u00a0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw := map[string]uint64{}
		for i, name := range strings.Split(s, "\x00") {
			raw[name] = uint64(i + 1)
		}
		got := trimEthtoolStatNames(raw)
		for range 4 {
			if again := trimEthtoolStatNames(raw); !maps.Equal(again, got) {
				t.Fatalf("trimEthtoolStatNames(%q) differs between runs: %v vs %v", s, got, again)
			}
		}
		want := map[string]bool{}
		for name, v := range raw {
			tr := schemas.TrimStatName(name)
			if tr == "" {
				continue
			}
			want[tr] = true
			if name == tr && got[tr] != v {
				t.Fatalf("%q: the trimmed spelling %q (%d) lost to %d", s, name, v, got[tr])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d names out, want %d", s, len(got), len(want))
		}
		for name := range got {
			if !want[name] || name != schemas.TrimStatName(name) || name == "" {
				t.Fatalf("%q: output name %q not a trimmed input name", s, name)
			}
		}
	})
}
