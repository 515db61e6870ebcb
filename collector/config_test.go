package collector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestConfigParseUint(t *testing.T) {
	const path = "/sys/class/net/x/mtu"
	tests := []struct {
		in      string
		want    uint64
		wantErr string // substring; "" means no error
	}{
		{"9000\n", 9000, ""},
		{"9000", 9000, ""},
		{"0\n", 0, ""},
		{"", 0, "empty"},
		{"\n", 0, "empty"},
		{"-1\n", 0, "negative"},
		{"1\n2\n", 0, "more than one line"},
		{"1\n\n", 0, "more than one line"},
		{"9000 \n", 0, "not a decimal number"},
		{" 9000", 0, "not a decimal number"},
		{"+9000", 0, "not a decimal number"},
		{"0x10", 0, "not a decimal number"},
		{"\x00\xff\xfe", 0, "not a decimal number"},
		{"99999999999999999999999", 0, "is above"},
		{"4294967296", 0, "is above"},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			got, err := parseConfigUint(path, []byte(tc.in), 1<<31)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("= %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("= %d, nil; want an error with %q", got, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %q: want it to start with the file and say %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigParseMTUAndEnable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{{"1500\n", 1500, true}, {"9000\n", 9000, true}, {"68", 68, true}, {"65536", 65536, true}, {"67", 0, false}, {"65537", 0, false}, {"0", 0, false}} {
		got, err := parseConfigMTU("mtu", []byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseConfigMTU(%q) = %d, %v; want %d ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in      string
		want    bool
		wantErr bool
	}{{"1\n", true, false}, {"0\n", false, false}, {"2\n", false, true}, {"01", true, false}, {"on", false, true}, {"", false, true}} {
		got, err := parseConfigEnable("enable/3", []byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseConfigEnable(%q) = %v, %v; want %v err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzConfigParseUint(f *testing.F) {
	for _, s := range []string{"9000\n", "0", "-1", "1\n2", "", "\n", "18446744073709551616", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseConfigUint("f", b, 1<<31)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		// Accepted: digits with at most one trailing newline, and it means
		// what strconv says.
		s := strings.TrimSuffix(string(b), "\n")
		want, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil || want != v || v > 1<<31 || strings.ContainsAny(s, "\n+- ") {
			t.Fatalf("parseConfigUint(%q) = %d; strconv says %d, %v", b, v, want, perr)
		}
	})
}

// DCB replies built the way the kernel's dcbnl_ieee_fill lays them out, in
// the machine's byte order: DCB_ATTR_IFNAME, then DCB_ATTR_IEEE (nested,
// NLA_F_NESTED set as the kernel's nla_nest_start does) holding ETS, PFC and
// APP_TABLE, then DCB_ATTR_DCBX.

func nlattrBytes(typ uint16, payload []byte) []byte {
	b := make([]byte, nlAlign(nlaHdrLen+len(payload)))
	binary.NativeEndian.PutUint16(b[0:], uint16(nlaHdrLen+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[nlaHdrLen:], payload)
	return b
}

func nested(typ uint16, attrs ...[]byte) []byte {
	return nlattrBytes(typ|0x8000, bytes.Join(attrs, nil))
}

func nlmsgBytes(typ uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, nlmsgHdrLen+nlAlign(len(payload)))
	binary.NativeEndian.PutUint32(b[0:], uint32(nlmsgHdrLen+len(payload)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint32(b[8:], seq)
	binary.NativeEndian.PutUint32(b[12:], 4242)
	copy(b[nlmsgHdrLen:], payload)
	return b
}

func dcbReplyBytes(seq uint32, attrs ...[]byte) []byte {
	return nlmsgBytes(rtmGetDCB, seq, append([]byte{syscall.AF_UNSPEC, dcbCmdIEEEGet, 0, 0}, bytes.Join(attrs, nil)...))
}

func nlErrorBytes(seq uint32, errno syscall.Errno) []byte {
	p := make([]byte, 4+nlmsgHdrLen)
	binary.NativeEndian.PutUint32(p, uint32(-int32(errno)))
	return nlmsgBytes(nlmsgError, seq, p)
}

// ieeePFCBytes is struct ieee_pfc (136 bytes) with pfc_cap 8.
func ieeePFCBytes(en byte) []byte {
	b := make([]byte, 136)
	b[0], b[1] = 8, en
	return b
}

func dcbAppBytes(typ uint16, sel, prio byte, proto uint16) []byte {
	p := []byte{sel, prio, 0, 0}
	binary.NativeEndian.PutUint16(p[2:], proto)
	return nlattrBytes(typ, p)
}

func ifnameAttr(name string) []byte { return nlattrBytes(dcbAttrIfname, append([]byte(name), 0)) }

func dcbxAttr() []byte { return nlattrBytes(14, []byte{0x04}) } // DCB_ATTR_DCBX: DCB_CAP_DCBX_VER_IEEE

func etsAttr() []byte { return nlattrBytes(1, make([]byte, 59)) } // struct ieee_ets

// mlx5DSCPApps is the APP table mlx5 fills while trust is dscp: each DSCP
// mapped to a priority (here the usual RoCE split: 26 -> 3, 48 -> 6).
func mlx5DSCPApps() [][]byte {
	var out [][]byte
	for dscp := range 64 {
		prio := byte(0)
		switch dscp {
		case 26:
			prio = 3
		case 48:
			prio = 6
		}
		out = append(out, dcbAppBytes(dcbAttrIEEEApp, dcbAppSelDSCP, prio, uint16(dscp)))
	}
	return out
}

func TestDecodeDCBReply(t *testing.T) {
	prios := func(p ...int) *[]int { return &p }
	tests := []struct {
		name      string
		in        []byte
		wantPFC   *[]int
		wantTrust string
		wantDone  bool
		errIs     error  // nil: no error unless errText is set
		errText   string // substring of the error
	}{
		{
			name: "mlx5 pcp trust, PFC on 3",
			in: dcbReplyBytes(7, ifnameAttr("ens1f0np0"),
				nested(dcbAttrIEEE, etsAttr(), nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0x08)), nested(dcbAttrIEEEAppTable)),
				dcbxAttr()),
			wantPFC: prios(3), wantTrust: "pcp", wantDone: true,
		},
		{
			name: "mlx5 dscp trust, PFC on 3 and 4",
			in: dcbReplyBytes(7, ifnameAttr("ens1f0np0"),
				nested(dcbAttrIEEE, etsAttr(), nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0x18)), nested(dcbAttrIEEEAppTable, mlx5DSCPApps()...)),
				dcbxAttr()),
			wantPFC: prios(3, 4), wantTrust: "dscp", wantDone: true,
		},
		{
			name: "PFC off everywhere is a known empty list",
			in: dcbReplyBytes(7, ifnameAttr("eth2"),
				nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0)), nested(dcbAttrIEEEAppTable))),
			wantPFC: prios(), wantTrust: "pcp", wantDone: true,
		},
		{
			name: "all priorities",
			in: dcbReplyBytes(7, ifnameAttr("eth2"),
				nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0xff)), nested(dcbAttrIEEEAppTable))),
			wantPFC: prios(0, 1, 2, 3, 4, 5, 6, 7), wantTrust: "pcp", wantDone: true,
		},
		{
			name: "ethertype app entries (FCoE, RoCEv1) are not dscp",
			in: dcbReplyBytes(7, ifnameAttr("eth2"),
				nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0x08)),
					nested(dcbAttrIEEEAppTable, dcbAppBytes(dcbAttrIEEEApp, 1, 3, 0x8915), dcbAppBytes(dcbAttrIEEEApp, 1, 3, 0x8906)))),
			wantPFC: prios(3), wantTrust: "pcp", wantDone: true,
		},
		{
			name: "driver without ieee_getpfc: PFC unknown",
			in: dcbReplyBytes(7, ifnameAttr("eth2"),
				nested(dcbAttrIEEE, etsAttr(), nested(dcbAttrIEEEAppTable))),
			wantPFC: nil, wantTrust: "pcp", wantDone: true,
		},
		{
			name:    "no DCB_ATTR_IEEE (CEE-only driver): all unknown",
			in:      dcbReplyBytes(7, ifnameAttr("eth2"), dcbxAttr()),
			wantPFC: nil, wantTrust: "", wantDone: true,
		},
		{
			name: "apptrust table decides, PCP first",
			in: dcbReplyBytes(7, ifnameAttr("sw0p1"),
				nested(dcbAttrIEEE, nested(dcbAttrIEEEAppTable, mlx5DSCPApps()...),
					nested(dcbAttrDCBAppTrustTable, nlattrBytes(dcbAttrDCBApp, []byte{dcbAppSelPCP}), nlattrBytes(dcbAttrIEEEApp, []byte{dcbAppSelDSCP})))),
			wantPFC: nil, wantTrust: "pcp", wantDone: true,
		},
		{
			name: "apptrust table decides, DSCP first",
			in: dcbReplyBytes(7, ifnameAttr("sw0p1"),
				nested(dcbAttrIEEE, nested(dcbAttrIEEEAppTable),
					nested(dcbAttrDCBAppTrustTable, nlattrBytes(dcbAttrIEEEApp, []byte{dcbAppSelDSCP}), nlattrBytes(dcbAttrDCBApp, []byte{dcbAppSelPCP})))),
			wantPFC: nil, wantTrust: "dscp", wantDone: true,
		},
		{
			name: "an ack and an answer to an older request come first",
			in: slices.Concat(nlErrorBytes(6, syscall.EOPNOTSUPP), nlErrorBytes(7, 0),
				dcbReplyBytes(7, nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0x08)), nested(dcbAttrIEEEAppTable)))),
			wantPFC: prios(3), wantTrust: "pcp", wantDone: true,
		},
		{name: "only other requests' answers", in: nlErrorBytes(3, syscall.ENODEV), wantDone: false},
		{name: "empty read", in: nil, wantDone: false},
		{name: "virtio: no dcbnl_ops", in: nlErrorBytes(7, syscall.EOPNOTSUPP), wantDone: true, errIs: errDCBNotExposed},
		{name: "netdev gone", in: nlErrorBytes(7, syscall.ENODEV), wantDone: true, errIs: errDCBNotExposed},
		{name: "other errno is an error", in: nlErrorBytes(7, syscall.EPERM), wantDone: true, errIs: syscall.EPERM},
		{name: "positive error code", in: nlmsgBytes(nlmsgError, 7, []byte{1, 0, 0, 0}), wantDone: true, errText: "no errno"},
		{name: "short error", in: nlmsgBytes(nlmsgError, 7, []byte{1}), wantDone: true, errText: "error message of 1 bytes"},
		{name: "short header", in: []byte{1, 2, 3}, errText: "shorter than a message header"},
		{name: "length overrun", in: func() []byte {
			b := dcbReplyBytes(7)
			binary.NativeEndian.PutUint32(b, 4096)
			return b
		}(), errText: "claims 4096 bytes"},
		{name: "attribute overrun", in: func() []byte {
			b := dcbReplyBytes(7, ifnameAttr("eth0"))
			binary.NativeEndian.PutUint16(b[nlmsgHdrLen+dcbMsgLen:], 200)
			return b
		}(), wantDone: true, errText: "attribute at offset 0 claims 200 bytes"},
		{name: "short PFC", in: dcbReplyBytes(7, nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, []byte{8}))), wantDone: true, errText: "DCB_ATTR_IEEE_PFC: 1 bytes"},
		{name: "short app entry", in: dcbReplyBytes(7, nested(dcbAttrIEEE, nested(dcbAttrIEEEAppTable, nlattrBytes(dcbAttrIEEEApp, []byte{5, 3})))), wantDone: true, errText: "entry: 2 bytes"},
		{name: "empty trust entry", in: dcbReplyBytes(7, nested(dcbAttrIEEE, nested(dcbAttrDCBAppTrustTable, nlattrBytes(dcbAttrIEEEApp, nil)))), wantDone: true, errText: "entry: empty"},
		{name: "wrong command", in: nlmsgBytes(rtmGetDCB, 7, []byte{0, 7, 0, 0}), wantDone: true, errText: "command 7"},
		{name: "short dcbmsg", in: nlmsgBytes(rtmGetDCB, 7, []byte{0}), wantDone: true, errText: "shorter than struct dcbmsg"},
		{name: "wrong type", in: nlmsgBytes(16, 7, nil), wantDone: true, errText: "message type 16"},
		{name: "done without answer", in: nlmsgBytes(nlmsgDone, 7, []byte{0, 0, 0, 0}), wantDone: true, errText: "done without"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, done, err := decodeDCBReply(tc.in, 7)
			switch {
			case tc.errIs != nil:
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
			case tc.errText != "":
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want one saying %q", err, tc.errText)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if tc.errIs == syscall.EPERM && errors.Is(err, errDCBNotExposed) {
				t.Fatalf("EPERM taken as not exposed: %v", err)
			}
			if done != tc.wantDone {
				t.Fatalf("done = %v, want %v", done, tc.wantDone)
			}
			if err != nil {
				return
			}
			if (cfg.pfc == nil) != (tc.wantPFC == nil) || (cfg.pfc != nil && !slices.Equal(*cfg.pfc, *tc.wantPFC)) {
				t.Errorf("pfc = %v, want %v", fmtPrios(cfg.pfc), fmtPrios(tc.wantPFC))
			}
			if cfg.trust != tc.wantTrust {
				t.Errorf("trust = %q, want %q", cfg.trust, tc.wantTrust)
			}
		})
	}
}

func fmtConfig(c *schemas.PortConfig) string {
	if c == nil {
		return "nil"
	}
	var b strings.Builder
	if c.MTU != nil {
		b.WriteString("mtu=" + strconv.Itoa(*c.MTU) + " ")
	}
	b.WriteString("pfc=" + fmtPrios(c.PFCEnabled) + " np=" + fmtPrios(c.ECNNPEnabled) + " rp=" + fmtPrios(c.ECNRPEnabled) + " trust=" + c.Trust)
	return b.String()
}

func fmtPrios(p *[]int) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}

func TestEncodeDCBGet(t *testing.T) {
	b := encodeDCBGet("ens1f0np0", 99)
	ne := binary.NativeEndian
	if len(b)%4 != 0 || int(ne.Uint32(b)) != len(b) {
		t.Fatalf("length %d, header says %d", len(b), ne.Uint32(b))
	}
	if ne.Uint16(b[4:]) != rtmGetDCB || ne.Uint16(b[6:]) != nlmFRequest || ne.Uint32(b[8:]) != 99 {
		t.Fatalf("header %x", b[:16])
	}
	if b[16] != syscall.AF_UNSPEC || b[17] != dcbCmdIEEEGet {
		t.Fatalf("dcbmsg %x", b[16:20])
	}
	var names []string
	if err := walkNlattrs(b[20:], "request", func(typ uint16, v []byte) error {
		if typ != dcbAttrIfname {
			t.Errorf("attribute type %d", typ)
		}
		names = append(names, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"ens1f0np0\x00"}) {
		t.Fatalf("ifname attributes %q, want one NUL-terminated name", names)
	}
}

func FuzzDecodeDCBReply(f *testing.F) {
	f.Add(dcbReplyBytes(7, ifnameAttr("eth0"), nested(dcbAttrIEEE, nlattrBytes(dcbAttrIEEEPFC, ieeePFCBytes(0x08)), nested(dcbAttrIEEEAppTable, mlx5DSCPApps()[:3]...))), uint32(7))
	f.Add(nlErrorBytes(7, syscall.EOPNOTSUPP), uint32(7))
	f.Add(slices.Concat(nlErrorBytes(7, 0), dcbReplyBytes(7, nested(dcbAttrIEEE, nested(dcbAttrDCBAppTrustTable, nlattrBytes(dcbAttrDCBApp, []byte{255}))))), uint32(7))
	f.Add([]byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, seq uint32) {
		cfg, done, err := decodeDCBReply(b, seq)
		if err != nil || !done {
			if cfg.pfc != nil || cfg.trust != "" {
				if err != nil {
					return // partial results beside an error are never used
				}
				t.Fatalf("not done but config %+v", cfg)
			}
			return
		}
		switch cfg.trust {
		case "", "pcp", "dscp":
		default:
			t.Fatalf("trust %q", cfg.trust)
		}
		if cfg.pfc != nil {
			p := *cfg.pfc
			if !slices.IsSorted(p) || len(slices.Compact(slices.Clone(p))) != len(p) || len(p) > 8 {
				t.Fatalf("pfc %v not sorted unique", p)
			}
			for _, v := range p {
				if v < 0 || v > 7 {
					t.Fatalf("pfc priority %d", v)
				}
			}
		}
	})
}
