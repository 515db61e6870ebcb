package collector

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// DefaultConfigInterval is how often (data time) the host source reads the
// ports' configuration: settings change by hand or by a deployment, far
// less often than counters, and a config_mismatch needs only to be seen
// within a few scrapes.
const DefaultConfigInterval = 30 * time.Second

// Where a RoCE port's settings are read, relative to the sysfs root (see
// docs/formats.md, "Configuration"):
//
//   - mtu: class/net/<netdev>/mtu, every kernel.
//   - ECN notification / reaction point per priority:
//     class/net/<netdev>/ecn/roce_np/enable/<prio> and .../roce_rp/enable/<prio>,
//     which only MLNX_OFED's mlx5_core creates. The upstream driver has no
//     such files (its DCQCN parameters are in debugfs, cc_params, without a
//     per-priority enable): there the lists stay unknown.
//   - PFC priorities, trust and the DSCP-to-priority map: DCB netlink
//     (RTM_GETDCB, DCB_CMD_IEEE_GET), what mlnx_qos and iproute2's dcb
//     read, upstream and MLNX_OFED alike.
//   - The DSCP and 802.1p priority of the CNPs the notification point
//     sends: class/net/<netdev>/ecn/roce_np/cnp_dscp and cnp_802p_prio
//     (MLNX_OFED's en_sysfs.c, "%d\n"; upstream has neither).
//   - The traffic class forced on the RDMA port's RoCE QPs:
//     class/infiniband/<dev>/tc/<port>/traffic_class (MLNX_OFED's mlx5_ib,
//     "Global tclass=<n>" when one is set, empty otherwise, then optional
//     per-rule lines).
const (
	configNetDir       = "class/net"
	configMTUFile      = "mtu"
	configECNNPDir     = "ecn/roce_np/enable"
	configECNRPDir     = "ecn/roce_rp/enable"
	configCNPDSCPFile  = "ecn/roce_np/cnp_dscp"
	configCNPPrioFile  = "ecn/roce_np/cnp_802p_prio"
	configTCDir        = "tc"
	configTClassFile   = "traffic_class"
	configTClassPrefix = "Global tclass="
)

// ConfigReader reads the settings of a port's netdev. Anything the host
// does not expose stays nil (unknown, never "off"); anything exposed but
// unreadable or malformed is an error naming the file or the netlink call,
// and stays nil too.
type ConfigReader struct {
	netDir string
	ibDir  string // <root>/class/infiniband: tc/<port>/traffic_class
	// dcb answers DCB_CMD_IEEE_GET for a netdev; nil skips DCB.
	dcb func(ctx context.Context, netdev string) (dcbConfig, error)
}

// NewConfigReader returns a reader of the sysfs mounted at root ("/sys")
// that asks the kernel's DCB netlink of the collector's network namespace.
func NewConfigReader(root string) *ConfigReader {
	return &ConfigReader{netDir: filepath.Join(root, configNetDir), ibDir: filepath.Join(root, sysfsClassDir), dcb: queryDCB}
}

// Read reads netdev's settings. The config is nil when nothing is known;
// err joins every source's failure and never means the rest is wrong.
func (r *ConfigReader) Read(ctx context.Context, netdev string) (*schemas.PortConfig, error) {
	if !validNetdevName(netdev) {
		return nil, fmt.Errorf("config of netdev %q: not a netdev name", netdev)
	}
	var cfg schemas.PortConfig
	var errs []error
	dir := filepath.Join(r.netDir, netdev)
	mtu, err := readConfigMTU(filepath.Join(dir, configMTUFile))
	switch {
	case err == nil:
		cfg.MTU = &mtu
	case !errors.Is(err, errConfigNotExposed):
		errs = append(errs, err)
	}
	for _, e := range []struct {
		dir  string
		dest **[]int
	}{{configECNNPDir, &cfg.ECNNPEnabled}, {configECNRPDir, &cfg.ECNRPEnabled}} {
		prios, err := readConfigPriorities(filepath.Join(dir, e.dir))
		switch {
		case err == nil:
			*e.dest = &prios
		case !errors.Is(err, errConfigNotExposed):
			errs = append(errs, err)
		}
	}
	for _, f := range []struct {
		file string
		max  uint64
		dest **int
	}{{configCNPDSCPFile, schemas.NumDSCP - 1, &cfg.CNPDSCP}, {configCNPPrioFile, schemas.MaxPriority, &cfg.CNP8021pPrio}} {
		v, err := readConfigSmall(filepath.Join(dir, f.file), f.max)
		switch {
		case err == nil:
			*f.dest = &v
		case !errors.Is(err, errConfigNotExposed):
			errs = append(errs, err)
		}
	}
	if r.dcb != nil {
		d, err := r.dcb(ctx, netdev)
		switch {
		case err == nil:
			cfg.PFCEnabled, cfg.Trust, cfg.DSCPPrio = d.pfc, d.trust, d.dscpPrio
		case !errors.Is(err, errDCBNotExposed):
			errs = append(errs, fmt.Errorf("DCB of netdev %s: %w", netdev, err))
		}
	}
	if cfg.Empty() {
		return nil, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		// Cannot happen with the parsers above; refuse rather than publish
		// what the decoder would refuse.
		return nil, errors.Join(append(errs, fmt.Errorf("config of netdev %s: %w", netdev, err))...)
	}
	return &cfg, errors.Join(errs...)
}

// errConfigNotExposed says a file or directory is not there: the host
// does not expose the setting.
var errConfigNotExposed = errors.New("not exposed")

// parseConfigUint parses a sysfs attribute that holds one decimal number:
// digits and at most one trailing newline, nothing else (no sign, no
// spaces, no second line), at most max. path names the file in errors.
func parseConfigUint(path string, b []byte, max uint64) (uint64, error) {
	s := b
	if len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	if len(s) == 0 {
		return 0, fmt.Errorf("%s: empty, want a number", path)
	}
	for i, c := range s {
		if c < '0' || c > '9' {
			what := "not a decimal number"
			switch {
			case c == '\n':
				what = "more than one line"
			case c == '-' && i == 0:
				what = "negative"
			}
			return 0, fmt.Errorf("%s: %s: %s", path, what, quoteConfigText(b))
		}
	}
	v, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil || v > max {
		return 0, fmt.Errorf("%s: %s is above %d", path, quoteConfigText(s), max)
	}
	return v, nil
}

// quoteConfigText quotes at most 32 bytes of hostile text for a log line.
func quoteConfigText(b []byte) string {
	if len(b) > 32 {
		return strconv.Quote(string(b[:32])) + "..."
	}
	return strconv.Quote(string(b))
}

// parseConfigMTU parses the netdev mtu attribute.
func parseConfigMTU(path string, b []byte) (int, error) {
	v, err := parseConfigUint(path, b, 1<<31)
	if err != nil {
		return 0, err
	}
	if v < 68 || v > 65536 {
		return 0, fmt.Errorf("%s: mtu %d outside 68..65536", path, v)
	}
	return int(v), nil
}

// readConfigSmall reads an attribute holding one number in 0..max.
func readConfigSmall(path string, max uint64) (int, error) {
	b, err := readConfigAttr(path)
	if err != nil {
		return 0, err
	}
	v, err := parseConfigUint(path, b, max)
	return int(v), err
}

// ReadTrafficClass reads the traffic class forced on the RoCE QPs of an
// RDMA port: nil when the host has no such file (upstream kernels) or
// none is forced (the file is empty, or lists only per-rule lines).
func (r *ConfigReader) ReadTrafficClass(device string, port int) (*int, error) {
	if r.ibDir == "" || device == "" || strings.ContainsAny(device, "/\x00") || device == "." || device == ".." || port < 1 {
		return nil, nil
	}
	path := filepath.Join(r.ibDir, device, configTCDir, strconv.Itoa(port), configTClassFile)
	b, err := readConfigAttr(path)
	if errors.Is(err, errConfigNotExposed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseTrafficClass(path, b)
}

// parseTrafficClass parses a tc/<port>/traffic_class file: a first line
// "Global tclass=<0..255>" when a class is forced; no such line (an empty
// file, or only the per-rule lines MLNX_OFED prints after it) is none.
func parseTrafficClass(path string, b []byte) (*int, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(line, configTClassPrefix)
	if !ok {
		if strings.HasPrefix(strings.TrimSpace(line), "Global") {
			return nil, fmt.Errorf("%s: %s is not %q<n>", path, quoteConfigText([]byte(line)), configTClassPrefix)
		}
		return nil, nil
	}
	v, err := parseConfigUint(path, []byte(rest), schemas.MaxTrafficClass)
	if err != nil {
		return nil, err
	}
	tc := int(v)
	return &tc, nil
}

// parseConfigEnable parses an ecn .../enable/<prio> attribute: 0 or 1.
func parseConfigEnable(path string, b []byte) (bool, error) {
	v, err := parseConfigUint(path, b, 1<<31)
	if err != nil {
		return false, err
	}
	if v > 1 {
		return false, fmt.Errorf("%s: %d, want 0 or 1", path, v)
	}
	return v == 1, nil
}

// readConfigMTU reads and parses an mtu file; errConfigNotExposed when
// there is none (the netdev is gone).
func readConfigMTU(path string) (int, error) {
	b, err := readConfigAttr(path)
	if err != nil {
		return 0, err
	}
	return parseConfigMTU(path, b)
}

// readConfigPriorities reads dir/0 .. dir/7: the priorities whose file
// says 1. errConfigNotExposed when dir is not there; a missing or bad
// priority file in a directory that is there is an error, since a
// priority left out could not be told from "off".
func readConfigPriorities(dir string) ([]int, error) {
	d, err := openConfigDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.close()
	prios := make([]int, 0, schemas.MaxPriority+1)
	for p := 0; p <= schemas.MaxPriority; p++ {
		name := strconv.Itoa(p)
		b, err := d.read(name)
		if errors.Is(err, errConfigNotExposed) {
			return nil, fmt.Errorf("%s/%s: missing while %s is there", dir, name, dir)
		}
		if err != nil {
			return nil, err
		}
		on, err := parseConfigEnable(dir+"/"+name, b)
		if err != nil {
			return nil, err
		}
		if on {
			prios = append(prios, p)
		}
	}
	return prios, nil
}

// hostConfigState is the host source's configuration reading: how often,
// when last, and which ports are failing (logged once).
type hostConfigState struct {
	reader *ConfigReader
	every  time.Duration
	last   time.Time         // data time of the scrape that last read
	failed map[string]string // "device/port" -> last error text
	errors uint64            // errors since the source started
}

// WithConfigInterval sets how often (data time) the ports' configuration
// is read: the first scrape reads it, then the first scrape at least d
// after the last that did. 0 turns reading the configuration off. The
// default is DefaultConfigInterval.
func WithConfigInterval(d time.Duration) HostOption {
	return func(c *hostConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: negative config interval %v", ErrInvalidHostOption, d)
		}
		c.configEvery = d
		return nil
	}
}

// ConfigErrors counts the configuration reads that failed (per port and
// source) since the source started: self-monitoring exports it.
func (h *HostSource) ConfigErrors() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.errors
}

// readConfig fills the ports' Config when a read is due. A netdev shared by
// several ports (a RoCE LAG) is read once; each port gets its own copy.
// Failures are logged at warn once per port and error text, counted, and
// never fail the scrape. Expects h.mu held.
func (h *HostSource) readConfig(ctx context.Context, rd *Reading) {
	s := &h.cfg
	if s.reader == nil || s.every <= 0 {
		return
	}
	if !s.last.IsZero() && rd.Time.Sub(s.last) < s.every && !rd.Time.Before(s.last) {
		return
	}
	s.last = rd.Time
	type result struct {
		cfg *schemas.PortConfig
		err error
	}
	seen := make(map[string]result)
	read := func(netdev string) result {
		res, ok := seen[netdev]
		if !ok {
			res.cfg, res.err = s.reader.Read(ctx, netdev)
			seen[netdev] = res
		}
		return res
	}
	for i := range rd.Ports {
		p := &rd.Ports[i]
		if p.Netdev == "" {
			continue // InfiniBand: no netdev to read
		}
		res := read(p.Netdev)
		if len(p.members) > 0 {
			// A LAG's settings are its members' (the bond has no DCB and
			// no ecn/): the first member's over the bond's own (its MTU).
			// Whether the members agree is config_mismatch's to judge,
			// from their own samples.
			first := read(p.members[0])
			res = result{cfg: res.cfg.Merge(first.cfg), err: errors.Join(res.err, first.err)}
			if res.cfg.Empty() {
				res.cfg = nil
			}
		}
		p.Config = clonePortConfig(res.cfg)
		if !p.lagMember {
			tc, err := s.reader.ReadTrafficClass(p.Device, p.Port)
			if tc != nil {
				if p.Config == nil {
					p.Config = &schemas.PortConfig{}
				}
				p.Config.TrafficClass = tc
			}
			res.err = errors.Join(res.err, err)
		}
		key := p.Device + "/" + strconv.Itoa(p.Port)
		if res.err != nil {
			s.errors++
			msg := res.err.Error()
			if s.failed[key] != msg {
				h.logger.Warn("port configuration partly unreadable; what could not be read stays unknown", "device", p.Device, "port", p.Port, "netdev", p.Netdev, "err", res.err)
			} else {
				h.logger.Debug("port configuration still partly unreadable", "device", p.Device, "port", p.Port, "netdev", p.Netdev, "err", res.err)
			}
			s.failed[key] = msg
			continue
		}
		if _, was := s.failed[key]; was {
			h.logger.Info("port configuration readable again", "device", p.Device, "port", p.Port, "netdev", p.Netdev)
			delete(s.failed, key)
		}
	}
}

// clonePortConfig copies c deeply, so no two readings share a list.
func clonePortConfig(c *schemas.PortConfig) *schemas.PortConfig {
	if c == nil {
		return nil
	}
	out := *c
	if c.MTU != nil {
		v := *c.MTU
		out.MTU = &v
	}
	for _, f := range []**[]int{&out.PFCEnabled, &out.ECNNPEnabled, &out.ECNRPEnabled, &out.DSCPPrio} {
		if *f != nil {
			l := slices.Clone(**f)
			*f = &l
		}
	}
	for _, f := range []**int{&out.CNPDSCP, &out.CNP8021pPrio, &out.TrafficClass} {
		if *f != nil {
			v := **f
			*f = &v
		}
	}
	return &out
}
