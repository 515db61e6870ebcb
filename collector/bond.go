package collector

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// A RoCE LAG (mlx5_bond_0, port 1, netdev bond0) has no statistics of its
// own: the bonding driver has no ethtool stats op, no DCB and no ecn/. Its
// members are where the counters and the settings live. The host source
// reads the members and publishes (docs/formats.md, "Bonded RoCE ports"):
//
//   - on the bond's sample, the sum over its members of every ethtool
//     statistic that is not a physical-layer one (pause frames and
//     durations, discards, packets, bytes, out_of_buffer, ...): the port's
//     traffic is the members' traffic; and schemas.GaugeLAGMembers, how
//     many members the sum adds up, since a pause is per link and a sum
//     of n links' pause durations can reach n intervals;
//   - one more sample per member that is up, device
//     schemas.BondMemberDevice(bond device, member), port 1: the member's
//     physical-layer statistics (schemas.BondMemberStat), which are per cable and mean
//     nothing summed (a BER of two cables added is no cable's BER), with
//     the member's own state, rate, ifindex and configuration.
//
// The bond's configuration is its first member's (bonding/slaves order)
// over what the bond netdev itself says; config_mismatch compares the
// members' samples with each other.

// configBondSlaves lists a bond's members, space separated, in the order
// they were enslaved; lower_<netdev> links name them too (and are all a
// team device has).
const (
	netBondSlaves = "bonding/slaves"
	netLowerPfx   = "lower_"
	netIfindex    = "ifindex"
	netOperstate  = "operstate"
	netSpeed      = "speed"
)

// maxBondMembers bounds a member list: the bonding driver allows any
// number, a RoCE LAG has 2 (4 on ConnectX-7's 4-port LAG); more is not a
// file the kernel wrote for an RDMA port.
const maxBondMembers = 16

// parseBondSlaves parses bonding/slaves: netdev names separated by single
// spaces, a trailing newline; an empty file is a bond without members.
// path names the file in errors.
func parseBondSlaves(path string, b []byte) ([]string, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil, nil
	}
	names := strings.Split(s, " ")
	if len(names) > maxBondMembers {
		return nil, fmt.Errorf("%s: %d members, at most %d", path, len(names), maxBondMembers)
	}
	for i, n := range names {
		if !validNetdevName(n) {
			return nil, fmt.Errorf("%s: member %d %s is not a netdev name", path, i+1, quoteConfigText([]byte(n)))
		}
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("%s: member %s listed twice", path, n)
		}
	}
	return names, nil
}

// sumBondStats returns the sum over members of their non-PHY statistics
// (a statistic some members lack sums those that have it), with
// schemas.GaugeLAGMembers set to the number of members summed, and each
// member's PHY statistics. The sum wraps never: u64 counters of two cables
// stay far below 2^64. The gauge is the collector's, not a driver's: the
// pause figures divide the summed pause durations by it to get one link's
// (schemas.PauseLinks); the delta engine passes it on as a gauge
// (schemas.KindOf), never as a counter.
func sumBondStats(members []string, stats map[string]map[string]uint64) (sum map[string]uint64, phy map[string]map[string]uint64) {
	sum = make(map[string]uint64)
	phy = make(map[string]map[string]uint64, len(members))
	for _, m := range members {
		own := make(map[string]uint64)
		for name, v := range stats[m] {
			if schemas.BondMemberStat(name) {
				own[name] = v
				continue
			}
			sum[name] += v
		}
		phy[m] = own
	}
	// Set after the sum: no driver lists the name, and if one did, its
	// values summed would not be the member count.
	sum[schemas.GaugeLAGMembers] = uint64(len(members))
	return sum, phy
}

// memberRate turns a netdev's speed (Mb/s, the speed attribute) into the
// port rate text schemas.ParseRateGbps reads. The lane count, which
// ports/<p>/rate gives as "(4X HDR)", is not in the netdev's sysfs: left
// out. "" when the speed is unknown (-1 while the link is down).
func memberRate(speedMbps int) string {
	if speedMbps <= 0 {
		return ""
	}
	return strconv.FormatFloat(float64(speedMbps)/1000, 'f', -1, 64) + " Gb/sec"
}

// netdevFacts is what the host source reads of a netdev every scrape.
type netdevFacts struct {
	ifindex int
	members []string // a bond's or team's members; nil otherwise
}

// readNetdevFacts reads netdev's ifindex and members below netDir
// (<root>/class/net). Errors name the file; a netdev without the file
// (a trace tree, a netdev gone) is 0 / no members.
func readNetdevFacts(netDir, netdev string) (netdevFacts, error) {
	var f netdevFacts
	dir := filepath.Join(netDir, netdev)
	var errs []error
	if n, err := readNetdevInt(filepath.Join(dir, netIfindex)); err == nil {
		f.ifindex = n
	} else if !attrMissing(err) {
		errs = append(errs, err)
	}
	path := filepath.Join(dir, netBondSlaves)
	b, err := readConfigAttr(path)
	switch {
	case err == nil:
		f.members, err = parseBondSlaves(path, b)
		if err != nil {
			errs = append(errs, err)
		}
	case attrMissing(err):
		// A team device (mlx5's LAG follows team too) names its members
		// only by lower_ links. A VLAN has one lower (its parent): no LAG.
		if lower := lowerNetdevs(dir); len(lower) >= 2 {
			f.members = lower
		}
	default:
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return f, fmt.Errorf("netdev %s: %w", netdev, errors.Join(errs...))
	}
	return f, nil
}

func lowerNetdevs(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if m, ok := strings.CutPrefix(e.Name(), netLowerPfx); ok && validNetdevName(m) && len(out) < maxBondMembers {
			out = append(out, m)
		}
	}
	return out // ReadDir sorts by name
}

// readNetdevInt reads an attribute holding one decimal integer; -1 (speed
// of a link that is down) reads as -1.
func readNetdevInt(path string) (int, error) {
	b, err := readConfigAttr(path)
	if err != nil {
		return 0, err
	}
	if t := strings.TrimSpace(string(b)); t == "-1" {
		return -1, nil
	}
	v, err := parseConfigUint(path, b, 1<<31-1)
	return int(v), err
}

func readNetdevText(path string) (string, error) {
	b, err := readConfigAttr(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func attrMissing(err error) bool { return err != nil && errors.Is(err, errConfigNotExposed) }

// memberReading is the port sample of one LAG member, without counters
// (readEthtool fills them).
func memberReading(bond *PortReading, netDir, member string) (PortReading, bool) {
	dir := filepath.Join(netDir, member)
	state, _ := readNetdevText(filepath.Join(dir, netOperstate))
	if state != "up" {
		return PortReading{}, false // as a port that is not ACTIVE: not read
	}
	pr := PortReading{
		Device:    schemas.BondMemberDevice(bond.Device, member),
		Port:      1,
		Netdev:    member,
		LinkLayer: "Ethernet",
		State:     sysfsActiveState,
		Time:      bond.Time,
	}
	if speed, err := readNetdevInt(filepath.Join(dir, netSpeed)); err == nil {
		pr.Rate = memberRate(speed)
	}
	if n, err := readNetdevInt(filepath.Join(dir, netIfindex)); err == nil {
		pr.Ifindex = n
	}
	return pr, true
}

// cloneStats copies a statistics map (nil stays nil).
func cloneStats(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
