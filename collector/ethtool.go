package collector

import (
	"errors"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrEthtoolClosed is returned by EthtoolReader.Stats after Close.
var ErrEthtoolClosed = errors.New("ethtool reader closed")

// ErrEthtoolUnsupported is returned by NewEthtoolReader on systems other
// than Linux, which have no ethtool ioctl.
var ErrEthtoolUnsupported = errors.New("ethtool statistics need Linux")

// netdevNameMax is IFNAMSIZ minus the terminating NUL. safchain/ethtool
// copies the name into a fixed IFNAMSIZ buffer and silently cuts a longer
// one, which could read the statistics of another interface.
const netdevNameMax = 15

// trimEthtoolStatNames trims every name. Older mlx5 kernels wrote
// "tx_pause_storm_warning_events " with a trailing space. Should a driver
// ever list several spellings of one name, the one already trimmed wins,
// else the smallest spelling: the same map always gives the same result,
// whatever the map order.
func trimEthtoolStatNames(raw map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(raw))
	from := make(map[string]string) // trimmed name -> the spelling taken, when it differs
	for name, v := range raw {
		t := schemas.TrimStatName(name)
		if t == "" {
			continue
		}
		if _, dup := out[t]; dup {
			src, untrimmed := from[t]
			if !untrimmed || (name != t && name > src) {
				continue
			}
		}
		out[t] = v
		if name != t {
			from[t] = name
		} else {
			delete(from, t)
		}
	}
	return out
}

// validNetdevName reports whether s can be a Linux interface name (the
// kernel's dev_valid_name rules).
func validNetdevName(s string) bool {
	if s == "" || len(s) > netdevNameMax || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\r\x00")
}
