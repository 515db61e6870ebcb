package sysfstest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseEthtool(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]uint64
		wantErr string // substring of the error; "" for none
	}{
		{
			name: "as ethtool prints it",
			in:   "NIC statistics:\n     rx_packets: 845320277\n     rx_bytes: 2195783498134\n",
			want: map[string]uint64{"rx_packets": 845320277, "rx_bytes": 2195783498134},
		},
		{
			name: "no header, comments and blank lines",
			in:   "# captured 2021-01-04\n\n     tx_global_pause: 1266552\n",
			want: map[string]uint64{"tx_global_pause": 1266552},
		},
		{
			// Older mlx5 kernels wrote the storm counter with a trailing
			// space; the collector trims it, so the capture must too.
			name: "trailing space in the name",
			in:   "     tx_pause_storm_warning_events : 3\n",
			want: map[string]uint64{"tx_pause_storm_warning_events": 3},
		},
		{
			name: "colon inside the name",
			in:   "     [0]: rx_bytes: 209487403324\n",
			want: map[string]uint64{"[0]: rx_bytes": 209487403324},
		},
		{
			name: "the largest u64",
			in:   "x: 18446744073709551615\n",
			want: map[string]uint64{"x": 18446744073709551615},
		},
		{name: "empty", in: "", want: map[string]uint64{}},
		{name: "note after the value", in: "NIC statistics:\n     rx_errors: 1  <--- error\n", wantErr: "line 2: rx_errors: value"},
		{name: "no colon", in: "rx_packets 12\n", wantErr: "line 1:"},
		{name: "no name", in: "   : 12\n", wantErr: "line 1:"},
		{name: "negative", in: "a: -1\n", wantErr: "not a decimal counter"},
		{name: "above u64", in: "a: 18446744073709551616\n", wantErr: "not a decimal counter"},
		{name: "hex", in: "a: 0x10\n", wantErr: "not a decimal counter"},
		{name: "listed twice", in: "a: 1\nb: 2\na: 3\n", wantErr: "line 3: a listed twice (first at line 1)"},
		{name: "two dumps", in: "NIC statistics:\na: 1\nNIC statistics:\na: 2\n", wantErr: "line 3: a second"},
		{name: "header after statistics", in: "a: 1\nNIC statistics:\n", wantErr: "line 2:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEthtool(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFromEthtoolCaptureNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cx9-ethtool.txt")
	if err := os.WriteFile(path, []byte("NIC statistics:\n  a: 1\n  b: two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromEthtoolCapture(path)
	if err == nil || !strings.Contains(err.Error(), path+": line 3: b:") {
		t.Fatalf("error %v, want one naming %s and line 3", err, path)
	}
	if _, err := FromEthtoolCapture(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file parsed")
	}
}

func FuzzParseEthtool(f *testing.F) {
	for _, s := range []string{
		"NIC statistics:\n     rx_packets: 845320277\n     rx_bytes: 2195783498134\n",
		"     tx_pause_storm_warning_events : 0\n",
		"     [0]: rx_bytes: 209487403324\n",
		"# note\n\nrx_global_pause_duration: 555665182\n",
		"NIC statistics:\nNIC statistics:\n",
		"a: 1\na: 1\n",
		"a: 18446744073709551616\n",
		": 1\n",
		"a:\n",
		"\xff: 1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseEthtool(strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error %q does not name its line", err)
			}
			return
		}
		// What was accepted reads back the same when printed the way
		// ethtool prints it: nothing was guessed or dropped.
		var b strings.Builder
		b.WriteString(ethtoolHeader + "\n")
		for _, name := range slices.Sorted(maps.Keys(got)) {
			if name == "" || name != strings.TrimSpace(name) {
				t.Fatalf("name %q is empty or untrimmed", name)
			}
			fmt.Fprintf(&b, "     %s: %d\n", name, got[name])
		}
		again, err := ParseEthtool(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("reprinted dump %q: %v", b.String(), err)
		}
		if !maps.Equal(got, again) {
			t.Fatalf("reprinted dump reads %v, want %v", again, got)
		}
	})
}
