package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

// The DCB netlink ABI (include/uapi/linux/dcbnl.h, include/uapi/linux/rtnetlink.h):
// what `mlnx_qos` and iproute2's `dcb` ask the kernel for. The message is
// built and decoded here by hand: neither github.com/vishvananda/netlink nor
// github.com/jsimonetti/rtnetlink implements RTM_GETDCB, the request is one
// header and one attribute, and the decoder is untrusted-input code that is
// fuzzed on its own (FuzzDecodeDCBReply), which is easier without a
// library's socket in the way. golang.org/x/sys/unix supplies the socket.
const (
	rtmGetDCB = 78 // RTM_GETDCB

	nlmsgHdrLen = 16 // struct nlmsghdr
	nlmsgError  = 2  // NLMSG_ERROR
	nlmsgDone   = 3  // NLMSG_DONE
	nlmFRequest = 0x1
	nlaHdrLen   = 4      // struct nlattr
	nlaTypeMask = 0x3fff // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
	dcbMsgLen   = 4      // struct dcbmsg {u8 dcb_family; u8 cmd; u16 dcb_pad}

	dcbCmdIEEEGet = 21 // DCB_CMD_IEEE_GET

	dcbAttrIfname = 1  // DCB_ATTR_IFNAME
	dcbAttrIEEE   = 13 // DCB_ATTR_IEEE (nested ieee_attrs)

	dcbAttrIEEEPFC          = 2  // DCB_ATTR_IEEE_PFC: struct ieee_pfc
	dcbAttrIEEEAppTable     = 3  // DCB_ATTR_IEEE_APP_TABLE (nested ieee_attrs_app)
	dcbAttrDCBAppTrustTable = 11 // DCB_ATTR_DCB_APP_TRUST_TABLE (kernel 6.2+, nested u8 selectors)

	dcbAttrIEEEApp = 1 // DCB_ATTR_IEEE_APP: struct dcb_app
	dcbAttrDCBApp  = 2 // DCB_ATTR_DCB_APP: struct dcb_app (selectors outside 802.1Qaz)

	dcbAppSelDSCP = 5   // IEEE_8021QAZ_APP_SEL_DSCP
	dcbAppSelPCP  = 255 // DCB_APP_SEL_PCP

	dcbAppLen = 4 // struct dcb_app {u8 selector; u8 priority; u16 protocol}
)

// errDCBNotExposed says the kernel answered that the netdev has no DCB
// (no dcbnl_ops: virtio, a bond, mlx5 built without CONFIG_MLX5_CORE_EN_DCB),
// the kernel has no DCB netlink at all, or the netdev is gone. That is
// "unknown", never "off", and not an error worth a warning.
var errDCBNotExposed = errors.New("DCB not exposed")

// dcbConfig is what one DCB_CMD_IEEE_GET reply says.
type dcbConfig struct {
	// pfc lists the priorities with PFC on; nil when the reply had no
	// DCB_ATTR_IEEE_PFC (the driver has no ieee_getpfc).
	pfc *[]int
	// trust is "dscp" or "pcp"; "" when the reply had no DCB_ATTR_IEEE.
	trust string
	// dscpPrio is the DSCP-to-priority map of the APP table, index DSCP;
	// nil unless the table maps every DSCP exactly once to a priority 0-7
	// (mlx5 lists all 64 while trust is dscp): a partial map would leave
	// the rest to a driver default the reply does not give.
	dscpPrio *[]int
}

// encodeDCBGet builds the DCB_CMD_IEEE_GET request for netdev.
func encodeDCBGet(netdev string, seq uint32) []byte {
	nameLen := len(netdev) + 1 // NUL-terminated, as the policy's NLA_NUL_STRING wants
	attrLen := nlaHdrLen + nameLen
	total := nlmsgHdrLen + dcbMsgLen + nlAlign(attrLen)
	b := make([]byte, total)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(total))
	ne.PutUint16(b[4:], rtmGetDCB)
	ne.PutUint16(b[6:], nlmFRequest)
	ne.PutUint32(b[8:], seq)
	// pid 0: the kernel fills in the socket's.
	b[nlmsgHdrLen] = syscall.AF_UNSPEC
	b[nlmsgHdrLen+1] = dcbCmdIEEEGet
	a := b[nlmsgHdrLen+dcbMsgLen:]
	ne.PutUint16(a[0:], uint16(attrLen))
	ne.PutUint16(a[2:], dcbAttrIfname)
	copy(a[nlaHdrLen:], netdev)
	return b
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// decodeDCBReply reads the kernel's answer to the request numbered seq out
// of one recvmsg's bytes. done is false when b held only messages for
// other requests (the caller reads again). An NLMSG_ERROR answer is a
// syscall.Errno, wrapped in errDCBNotExposed when it means "no DCB here".
// Anything malformed is an error saying what and at which byte.
func decodeDCBReply(b []byte, seq uint32) (cfg dcbConfig, done bool, err error) {
	ne := binary.NativeEndian
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < nlmsgHdrLen {
			return cfg, false, fmt.Errorf("dcb netlink reply: %d bytes at offset %d, shorter than a message header", len(rest), off)
		}
		mlen := int(ne.Uint32(rest[0:]))
		if mlen < nlmsgHdrLen || mlen > len(rest) {
			return cfg, false, fmt.Errorf("dcb netlink reply: message at offset %d claims %d bytes, %d left", off, mlen, len(rest))
		}
		typ, mseq := ne.Uint16(rest[4:]), ne.Uint32(rest[8:])
		msg := rest[nlmsgHdrLen:mlen]
		off += nlAlign(mlen)
		if mseq != seq {
			continue // a late answer to an earlier request
		}
		switch typ {
		case nlmsgError:
			if len(msg) < 4 {
				return cfg, true, fmt.Errorf("dcb netlink reply: error message of %d bytes", len(msg))
			}
			code := int32(ne.Uint32(msg))
			if code == 0 {
				continue // an ack; the answer is another message
			}
			if code > 0 || code < -4095 {
				return cfg, true, fmt.Errorf("dcb netlink reply: error code %d is no errno", code)
			}
			errno := syscall.Errno(-code)
			switch errno {
			case syscall.EOPNOTSUPP, syscall.ENODEV, syscall.ENOENT:
				return cfg, true, fmt.Errorf("%w: %w", errDCBNotExposed, errno)
			}
			return cfg, true, fmt.Errorf("dcb netlink: %w", errno)
		case nlmsgDone:
			return cfg, true, fmt.Errorf("dcb netlink reply: done without an answer")
		case rtmGetDCB:
			if len(msg) < dcbMsgLen {
				return cfg, true, fmt.Errorf("dcb netlink reply: %d bytes, shorter than struct dcbmsg", len(msg))
			}
			if cmd := msg[1]; cmd != dcbCmdIEEEGet {
				return cfg, true, fmt.Errorf("dcb netlink reply: command %d, asked %d", cmd, dcbCmdIEEEGet)
			}
			cfg, err = decodeDCBAttrs(msg[dcbMsgLen:])
			return cfg, true, err
		default:
			return cfg, true, fmt.Errorf("dcb netlink reply: message type %d, want %d", typ, rtmGetDCB)
		}
	}
	return cfg, false, nil
}

// decodeDCBAttrs reads the top-level attributes of a DCB_CMD_IEEE_GET
// reply. Only DCB_ATTR_IEEE matters; without it the driver answered but
// exposes nothing of IEEE 802.1Qaz (a CEE-only driver): unknown.
func decodeDCBAttrs(b []byte) (dcbConfig, error) {
	var cfg dcbConfig
	err := walkNlattrs(b, "reply", func(typ uint16, v []byte) error {
		if typ != dcbAttrIEEE {
			return nil
		}
		return decodeDCBIEEE(v, &cfg)
	})
	return cfg, err
}

// decodeDCBIEEE reads DCB_ATTR_IEEE: PFC from DCB_ATTR_IEEE_PFC's pfc_en
// bitmap; trust from DCB_ATTR_DCB_APP_TRUST_TABLE where the driver has
// one (its first DSCP or PCP selector has precedence), else the way
// mlnx_qos tells it on mlx5, whose driver puts the DSCP-to-priority map
// into the APP table exactly while trust is dscp: a DSCP entry in
// DCB_ATTR_IEEE_APP_TABLE means dscp, none means pcp.
func decodeDCBIEEE(b []byte, cfg *dcbConfig) error {
	var appDSCP, sawApp, badDSCP bool
	var dscpMap [64]int
	var dscpSeen uint64
	trust := ""
	err := walkNlattrs(b, "DCB_ATTR_IEEE", func(typ uint16, v []byte) error {
		switch typ {
		case dcbAttrIEEEPFC:
			// struct ieee_pfc {u8 pfc_cap; u8 pfc_en; ...}
			if len(v) < 2 {
				return fmt.Errorf("DCB_ATTR_IEEE_PFC: %d bytes, want at least 2", len(v))
			}
			prios := make([]int, 0, 8)
			for p := 0; p <= 7; p++ {
				if v[1]&(1<<p) != 0 {
					prios = append(prios, p)
				}
			}
			cfg.pfc = &prios
		case dcbAttrIEEEAppTable:
			sawApp = true
			return walkNlattrs(v, "DCB_ATTR_IEEE_APP_TABLE", func(typ uint16, app []byte) error {
				if typ != dcbAttrIEEEApp && typ != dcbAttrDCBApp {
					return nil
				}
				if len(app) < dcbAppLen {
					return fmt.Errorf("DCB_ATTR_IEEE_APP_TABLE entry: %d bytes, want %d", len(app), dcbAppLen)
				}
				if app[0] == dcbAppSelDSCP {
					appDSCP = true
					// struct dcb_app {u8 selector; u8 priority; u16 protocol}:
					// for the DSCP selector the protocol is the DSCP.
					dscp, prio := binary.NativeEndian.Uint16(app[2:]), app[1]
					switch {
					case dscp >= 64 || prio > 7 || dscpSeen&(1<<dscp) != 0:
						badDSCP = true // more than one priority for a DSCP, or out of range
					default:
						dscpSeen |= 1 << dscp
						dscpMap[dscp] = int(prio)
					}
				}
				return nil
			})
		case dcbAttrDCBAppTrustTable:
			return walkNlattrs(v, "DCB_ATTR_DCB_APP_TRUST_TABLE", func(_ uint16, sel []byte) error {
				if len(sel) < 1 {
					return fmt.Errorf("DCB_ATTR_DCB_APP_TRUST_TABLE entry: empty")
				}
				if trust == "" {
					switch sel[0] {
					case dcbAppSelDSCP:
						trust = "dscp"
					case dcbAppSelPCP:
						trust = "pcp"
					}
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !badDSCP && dscpSeen == ^uint64(0) {
		m := dscpMap[:]
		m = append([]int(nil), m...)
		cfg.dscpPrio = &m
	}
	switch {
	case trust != "":
		cfg.trust = trust
	case appDSCP:
		cfg.trust = "dscp"
	case sawApp:
		cfg.trust = "pcp"
	}
	return nil
}

// walkNlattrs calls fn with each attribute's type (flags masked) and
// payload. where names the enclosing attribute in errors.
func walkNlattrs(b []byte, where string, fn func(typ uint16, v []byte) error) error {
	ne := binary.NativeEndian
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < nlaHdrLen {
			return fmt.Errorf("dcb netlink %s: %d stray bytes at offset %d", where, len(rest), off)
		}
		alen := int(ne.Uint16(rest[0:]))
		if alen < nlaHdrLen || alen > len(rest) {
			return fmt.Errorf("dcb netlink %s: attribute at offset %d claims %d bytes, %d left", where, off, alen, len(rest))
		}
		if err := fn(ne.Uint16(rest[2:])&nlaTypeMask, rest[nlaHdrLen:alen]); err != nil {
			return fmt.Errorf("dcb netlink %s: %w", where, err)
		}
		off += nlAlign(alen)
	}
	return nil
}
