package schemas

import (
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func cfgInt(v int) *int        { return &v }
func cfgPrios(p ...int) *[]int { return &p }

func TestPortConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       *PortConfig
		wantErr string
	}{
		{"nil", nil, ""},
		{"empty", &PortConfig{}, ""},
		{"full", &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3, 4), ECNRPEnabled: cfgPrios(), Trust: "dscp"}, ""},
		{"smallest mtu", &PortConfig{MTU: cfgInt(68)}, ""},
		{"largest mtu", &PortConfig{MTU: cfgInt(65536)}, ""},
		{"mtu too small", &PortConfig{MTU: cfgInt(67)}, "mtu 67"},
		{"mtu too large", &PortConfig{MTU: cfgInt(65537)}, "mtu 65537"},
		{"negative mtu", &PortConfig{MTU: cfgInt(-1)}, "mtu -1"},
		{"priority 8", &PortConfig{PFCEnabled: cfgPrios(8)}, "pfc_enabled: priority 8"},
		{"negative priority", &PortConfig{ECNNPEnabled: cfgPrios(-1)}, "ecn_np_enabled: priority -1"},
		{"nine priorities", &PortConfig{ECNRPEnabled: cfgPrios(0, 1, 2, 3, 4, 5, 6, 7, 7)}, "ecn_rp_enabled: 9 priorities"},
		{"trust pcp", &PortConfig{Trust: "pcp"}, ""},
		{"trust other", &PortConfig{Trust: "DSCP"}, `trust "DSCP"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestPortConfigEqualMergeEmpty(t *testing.T) {
	full := &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(3), Trust: "dscp"}
	equal := []struct {
		name string
		a, b *PortConfig
		want bool
	}{
		{"nil and empty", nil, &PortConfig{}, true},
		{"nil and known", nil, full, false},
		{"same", full, &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(3), Trust: "dscp"}, true},
		{"priorities as sets", &PortConfig{PFCEnabled: cfgPrios(4, 3, 3)}, &PortConfig{PFCEnabled: cfgPrios(3, 4)}, true},
		{"unknown is not empty", &PortConfig{MTU: cfgInt(1500), PFCEnabled: cfgPrios()}, &PortConfig{MTU: cfgInt(1500)}, false},
		{"mtu differs", &PortConfig{MTU: cfgInt(1500)}, &PortConfig{MTU: cfgInt(9000)}, false},
		{"mtu unknown on one side", &PortConfig{MTU: cfgInt(1500), Trust: "pcp"}, &PortConfig{Trust: "pcp"}, false},
		{"trust differs", &PortConfig{Trust: "pcp"}, &PortConfig{Trust: "dscp"}, false},
	}
	for _, tc := range equal {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.b.Equal(tc.a); got != tc.want {
			t.Errorf("%s: Equal is not symmetric", tc.name)
		}
	}

	// Merge: what the newer reading knows wins, what it does not know keeps
	// the older value; neither side is changed.
	older := &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), Trust: "dscp"}
	newer := &PortConfig{MTU: cfgInt(4200), ECNNPEnabled: cfgPrios()}
	m := older.Merge(newer)
	if want := (&PortConfig{MTU: cfgInt(4200), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(), Trust: "dscp"}); !m.Equal(want) {
		t.Errorf("Merge = %+v", m)
	}
	if *older.MTU != 9000 || older.ECNNPEnabled != nil {
		t.Errorf("Merge changed its receiver: %+v", older)
	}
	if got := (*PortConfig)(nil).Merge(newer); !got.Equal(newer) {
		t.Errorf("nil.Merge = %+v", got)
	}
	if got := older.Merge(nil); !got.Equal(older) || got == older {
		t.Errorf("Merge(nil) = %+v (a copy of the receiver wanted)", got)
	}

	if !(*PortConfig)(nil).Empty() || !(&PortConfig{}).Empty() || (&PortConfig{PFCEnabled: cfgPrios()}).Empty() {
		t.Error("Empty: a known empty list is not nothing known")
	}
	for _, tc := range []struct {
		list      *[]int
		p         int
		on, known bool
	}{{nil, 3, false, false}, {cfgPrios(), 3, false, true}, {cfgPrios(3), 3, true, true}, {cfgPrios(3), 4, false, true}} {
		if on, known := PriorityOn(tc.list, tc.p); on != tc.on || known != tc.known {
			t.Errorf("PriorityOn(%v, %d) = %v, %v", tc.list, tc.p, on, known)
		}
	}
}

// FuzzPortConfig decodes a config as the inventory's `cfg` field does and
// checks what the collector and the sink rely on: a config that validates
// equals itself, merging it into anything gives it back where it knows,
// and its msgpack form round-trips.
func FuzzPortConfig(f *testing.F) {
	for _, c := range []*PortConfig{
		{},
		{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(), Trust: "dscp"},
		{PFCEnabled: cfgPrios(9)},
		{Trust: "pcp"},
	} {
		b, err := msgpack.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A config only travels inside an inventory, whose decoder walks
		// the bytes with checkWire before msgpack.Unmarshal: msgpack v5.4.1
		// sizes a slice by the count the message claims whatever its
		// alloc-limit flag says (decode_slice.go tests the flag against 1),
		// so an unguarded Unmarshal of "pfc: array32(4e9)" takes 32 GB and
		// the fuzz worker with it.
		if checkWire(data, MaxPriority+1) != nil {
			return
		}
		var c PortConfig
		if err := msgpack.Unmarshal(data, &c); err != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		if !c.Equal(&c) {
			t.Fatalf("%+v does not equal itself", c)
		}
		base := &PortConfig{MTU: cfgInt(1500), PFCEnabled: cfgPrios(0), ECNNPEnabled: cfgPrios(1), ECNRPEnabled: cfgPrios(2), Trust: "pcp"}
		m := base.Merge(&c)
		if m.Validate() != nil || (c.MTU != nil && *m.MTU != *c.MTU) || (c.Trust != "" && m.Trust != c.Trust) || m.Empty() {
			t.Fatalf("merge of %+v into %+v gave %+v", c, base, m)
		}
		if !c.Merge(nil).Equal(&c) {
			t.Fatalf("%+v merged with nothing changed", c)
		}
		b, err := msgpack.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		var back PortConfig
		if err := msgpack.Unmarshal(b, &back); err != nil || !back.Equal(&c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, back, err)
		}
	})
}
