package sysfstest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ethtoolHeader is the first line `ethtool -S` prints.
const ethtoolHeader = "NIC statistics:"

// FromEthtoolCapture reads a file holding one `ethtool -S` dump (see
// ParseEthtool); errors name the file and the line.
func FromEthtoolCapture(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sysfstest: %w", err)
	}
	defer f.Close()
	stats, err := ParseEthtool(f)
	if err != nil {
		return nil, fmt.Errorf("sysfstest: %s: %w", path, err)
	}
	return stats, nil
}

// ParseEthtool reads one dump of `ethtool -S <netdev>` as the tool prints
// it: an optional "NIC statistics:" line, then one "name: value" line per
// statistic, indented. Blank lines and lines starting with '#' (a
// capture's notes) are skipped.
//
// The name is everything before the last ':' of the line, trimmed the way
// the collector trims what the driver returns (schemas.TrimStatName), so a
// capture and a live read give the same keys; some drivers put ':' inside
// their names ("[0]: rx_bytes"). A value must be a decimal uint64: a
// capture that lost digits or carries a note after the value is refused,
// never read as something else. A name listed twice is refused too: the
// reader keeps one value per name, so a second one would be silently lost.
// A second "NIC statistics:" line means two dumps were pasted together:
// split them first.
func ParseEthtool(r io.Reader) (map[string]uint64, error) {
	stats := make(map[string]uint64)
	seen := make(map[string]int) // name -> line it was read at
	header := 0
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == ethtoolHeader {
			if header != 0 {
				return nil, fmt.Errorf("line %d: a second %q (the first at line %d): one dump per parse", n, ethtoolHeader, header)
			}
			if len(seen) != 0 {
				return nil, fmt.Errorf("line %d: %q after statistics", n, ethtoolHeader)
			}
			header = n
			continue
		}
		i := strings.LastIndexByte(t, ':')
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q is not \"name: value\"", n, sc.Text())
		}
		name := schemas.TrimStatName(t[:i])
		if name == "" {
			return nil, fmt.Errorf("line %d: %q has no statistic name", n, sc.Text())
		}
		raw := strings.TrimSpace(t[i+1:])
		v, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: value %q is not a decimal counter", n, name, raw)
		}
		if at, dup := seen[name]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice (first at line %d)", n, name, at)
		}
		seen[name] = n
		stats[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return stats, nil
}
