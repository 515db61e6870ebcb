package corpus

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// nicsDir holds the captures; legacyCapture is the older procfs one, kept
// where the collector's own tests read it and replayed here too.
const (
	nicsDir       = "../fixtures/nics"
	legacyCapture = "../fixtures/mlx-sysfs-capture.txt"
)

// A capture file is one of two kinds, told by its name: "-ethtool.txt"
// holds `ethtool -S` text, anything else sysfs "path = content" lines
// (collector/sysfstest's capture format, paths below /sys/class/infiniband).
//
// Two directives, written as comments so the file stays in its format:
//
//	# @dump +10s     a new dump, read that long after the first one
//	# @netdev ens5   the ethtool lines that follow are ens5's
//
// sysfs lines before the first "# @dump" hold for every dump (a port's
// state, link layer and rate, which the tools that printed the counters
// did not repeat). A file without "# @dump" is one dump.

// capture is one parsed file.
type capture struct {
	path    string
	ethtool bool
	dumps   []dump
}

// dump is one reading of everything in a capture.
type dump struct {
	line int           // the file line the dump starts at (its directive), 0 for an implicit one
	at   time.Duration // after the first dump
	// spec is the sysfs tree of a sysfs capture.
	spec sysfstest.Spec
	// devHW are device-level hw_counters (<dev>/hw_counters/<name>), which
	// mlx4 has instead of per-port ones and which sysfstest's format and
	// tree have no place for.
	devHW map[string]map[string]uint64
	// stats are the ethtool statistics by netdev ("" when the capture does
	// not name its netdev).
	stats map[string]map[string]uint64
}

var (
	dumpDirective   = regexp.MustCompile(`^#\s*@dump\s+\+(\S+)\s*$`)
	netdevDirective = regexp.MustCompile(`^#\s*@netdev\s+(\S+)\s*$`)
	devHWLine       = regexp.MustCompile(`^([A-Za-z0-9_.-]+)/hw_counters/([A-Za-z0-9_]+)\s*=\s*(.*)$`)
)

// loadCapture parses a capture file. Errors name the file and its line.
func loadCapture(path string) (*capture, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(raw), "\n")
	c := &capture{path: path, ethtool: strings.HasSuffix(path, "-ethtool.txt")}

	// Sections: which lines belong to which dump and netdev. Section -1 is
	// the prelude shared by every dump.
	type section struct {
		dump   int
		netdev string
	}
	owner := make([]section, len(lines))
	dumpIdx, netdev := -1, ""
	starts := []int{} // line numbers of the dumps' directives
	ats := []time.Duration{}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if m := dumpDirective.FindStringSubmatch(t); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil || d < 0 {
				return nil, fmt.Errorf("%s:%d: dump offset %q is not a duration", path, i+1, m[1])
			}
			if len(ats) > 0 && d <= ats[len(ats)-1] {
				return nil, fmt.Errorf("%s:%d: dump at +%v is not after the one before", path, i+1, d)
			}
			dumpIdx++
			netdev = ""
			starts, ats = append(starts, i+1), append(ats, d)
			owner[i] = section{dump: -2}
			continue
		}
		if m := netdevDirective.FindStringSubmatch(t); m != nil {
			netdev = m[1]
			owner[i] = section{dump: -2}
			continue
		}
		owner[i] = section{dump: dumpIdx, netdev: netdev}
	}
	ndumps := max(dumpIdx+1, 1)
	if dumpIdx < 0 {
		// No directive: everything is the one dump.
		for i := range owner {
			if owner[i].dump == -1 {
				owner[i].dump = 0
			}
		}
		starts, ats = []int{0}, []time.Duration{0}
	}

	// blank returns the file with only the lines keep accepts, the others
	// emptied, so a parser's "line N" is the file's line N.
	blank := func(keep func(i int) bool) string {
		var b strings.Builder
		for i, l := range lines {
			if keep(i) {
				b.WriteString(l)
			}
			b.WriteByte('\n')
		}
		return b.String()
	}
	for d := range ndumps {
		dp := dump{line: starts[d], at: ats[d], devHW: map[string]map[string]uint64{}, stats: map[string]map[string]uint64{}}
		inDump := func(i int) bool { return owner[i].dump == d || owner[i].dump == -1 }
		if c.ethtool {
			netdevs := []string{}
			for i := range lines {
				if inDump(i) && !slices.Contains(netdevs, owner[i].netdev) {
					netdevs = append(netdevs, owner[i].netdev)
				}
			}
			for _, nd := range netdevs {
				text := blank(func(i int) bool { return inDump(i) && owner[i].netdev == nd })
				stats, err := sysfstest.ParseEthtool(strings.NewReader(text))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				if len(stats) > 0 {
					dp.stats[nd] = stats
				}
			}
		} else {
			for i, l := range lines {
				m := devHWLine.FindStringSubmatch(strings.TrimSpace(l))
				if m == nil || !inDump(i) || strings.HasPrefix(strings.TrimSpace(l), "#") {
					continue
				}
				v, err := strconv.ParseUint(strings.TrimSpace(m[3]), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %s/hw_counters/%s: %q is not a counter", path, i+1, m[1], m[2], m[3])
				}
				if dp.devHW[m[1]] == nil {
					dp.devHW[m[1]] = map[string]uint64{}
				}
				dp.devHW[m[1]][m[2]] = v
			}
			text := blank(func(i int) bool { return inDump(i) && !devHWLine.MatchString(strings.TrimSpace(lines[i])) })
			spec, err := sysfstest.ParseCapture(strings.NewReader(text))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			dp.spec = spec
		}
		c.dumps = append(c.dumps, dp)
	}
	return c, nil
}

// header returns the leading comment lines of a file.
func header(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(t, "#") || dumpDirective.MatchString(t) || netdevDirective.MatchString(t) {
			break
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// portState reads a sysfs state text ("4: ACTIVE") the way the collector
// does: without its number.
func portState(s string) string {
	if _, after, ok := strings.Cut(s, ":"); ok {
		return strings.TrimSpace(after)
	}
	return strings.TrimSpace(s)
}

// numbers converts a capture's counter files to values; a file that is not
// a number fails the test, since the reader would drop it.
func numbers(t *testing.T, where string, m map[string]string) map[string]uint64 {
	t.Helper()
	if m == nil {
		return nil
	}
	out := make(map[string]uint64, len(m))
	for name, s := range m {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Errorf("%s/%s: %q is not a counter", where, name, s)
			continue
		}
		out[name] = v
	}
	return out
}

// readings turns one dump into the port readings a collector on that host
// would make: one per sysfs port (ACTIVE or with no state captured) with
// its counters and hw_counters, and one per ethtool netdev, as a port of
// its own named after the capture (an ethtool capture has no sysfs port).
// Device-level hw_counters (mlx4) go with the device's lowest-numbered
// port, as the collector's sysfs reader puts them (a name the port lists
// itself wins), and only while that port is read. Each ethtool netdev is a
// port of its own, numbered in the capture's order.
func readings(t *testing.T, c *capture, d dump, at time.Time) []collector.PortReading {
	t.Helper()
	var out []collector.PortReading
	for _, dev := range d.spec.Devices {
		lowest := 0
		for _, p := range dev.Ports {
			if lowest == 0 || p.Num < lowest {
				lowest = p.Num
			}
		}
		for _, p := range dev.Ports {
			state := portState(p.Files["state"])
			if state != "" && state != "ACTIVE" {
				continue
			}
			where := fmt.Sprintf("%s: %s/ports/%d", filepath.Base(c.path), dev.Name, p.Num)
			pr := collector.PortReading{
				Device: dev.Name, Port: p.Num, LinkLayer: p.Files["link_layer"], State: state, Rate: p.Files["rate"], Time: at,
				Counters: numbers(t, where+"/counters", p.Counters), HWCounters: numbers(t, where+"/hw_counters", p.HWCounters),
			}
			if p.Num == lowest && len(d.devHW[dev.Name]) > 0 {
				if pr.HWCounters == nil {
					pr.HWCounters = map[string]uint64{}
				}
				for name, v := range d.devHW[dev.Name] {
					if _, own := pr.HWCounters[name]; !own {
						pr.HWCounters[name] = v
					}
				}
			}
			out = append(out, pr)
		}
	}
	for i, nd := range sortedKeys(d.stats) {
		out = append(out, collector.PortReading{
			Device: strings.TrimSuffix(filepath.Base(c.path), ".txt"), Port: i + 1, Netdev: nd, LinkLayer: "Ethernet", State: "ACTIVE", Time: at,
			Ethtool: d.stats[nd],
		})
	}
	return out
}

// portKey names a reading in messages and lookups.
func portKey(device string, port int, netdev string) string {
	if netdev != "" {
		return device + "/" + netdev
	}
	return fmt.Sprintf("%s/%d", device, port)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sourced is every counter of a reading with its source.
type sourced struct {
	src   schemas.Source
	name  string
	value uint64
}

func counterList(pr collector.PortReading) []sourced {
	var out []sourced
	for _, set := range []struct {
		src schemas.Source
		m   map[string]uint64
	}{{schemas.SourceCounters, pr.Counters}, {schemas.SourceHWCounters, pr.HWCounters}, {schemas.SourceEthtool, pr.Ethtool}} {
		for _, name := range sortedKeys(set.m) {
			out = append(out, sourced{set.src, name, set.m[name]})
		}
	}
	return out
}
