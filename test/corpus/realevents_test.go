package corpus

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
)

// configDir holds real configuration captures (mlnx_qos output, ecn/ and
// tc/ sysfs values). They live here, not in nicsDir: every file there is
// replayed as a counter dump by TestCorpusFiles, and the sysfs capture
// format has no place for class/net or tc/<port> files.
const configDir = "testdata/config"

// configCapture is one configuration capture: the published output ("#|"
// lines, verbatim) and the sysfs files it shows ("/sys/class/... = content").
type configCapture struct {
	quoted []string
	files  map[string]string // path below /sys/class -> content
}

var configFileLine = regexp.MustCompile(`^/sys/class/(\S+) = (.*)$`)

func loadConfigCapture(t *testing.T, name string) configCapture {
	t.Helper()
	f, err := os.Open(filepath.Join(configDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := configCapture{files: map[string]string{}}
	sc := bufio.NewScanner(f)
	first := true
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if first && !strings.HasPrefix(l, "# source:") {
			t.Fatalf("%s: the first line must be \"# source: ...\", got %q", name, l)
		}
		first = false
		switch {
		case strings.HasPrefix(l, "#|"):
			c.quoted = append(c.quoted, strings.TrimPrefix(strings.TrimPrefix(l, "#|"), " "))
		case strings.HasPrefix(l, "#"), strings.TrimSpace(l) == "":
		default:
			m := configFileLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%s:%d: %q is neither a comment nor \"/sys/class/<path> = content\"", name, n, l)
			}
			c.files[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// spec builds the sysfs tree the capture's files imply: ecn/ files of a
// netdev, tc/<port>/traffic_class of an RDMA device. Any other path fails.
func (c configCapture) spec(t *testing.T) sysfstest.Spec {
	t.Helper()
	var spec sysfstest.Spec
	netdev := func(name string) *sysfstest.Netdev {
		for i := range spec.Netdevs {
			if spec.Netdevs[i].Name == name {
				return &spec.Netdevs[i]
			}
		}
		spec.Netdevs = append(spec.Netdevs, sysfstest.Netdev{Name: name})
		return &spec.Netdevs[len(spec.Netdevs)-1]
	}
	for _, path := range sortedKeys(c.files) {
		content := c.files[path]
		p := strings.Split(path, "/")
		switch {
		case len(p) == 6 && p[0] == "net" && p[2] == "ecn" && p[4] == "enable" && (p[3] == "roce_np" || p[3] == "roce_rp"):
			prio, err := strconv.Atoi(p[5])
			if err != nil {
				t.Fatalf("%s: priority %q", path, p[5])
			}
			nd := netdev(p[1])
			m := &nd.ECNNP
			if p[3] == "roce_rp" {
				m = &nd.ECNRP
			}
			if *m == nil {
				*m = map[int]string{}
			}
			(*m)[prio] = content
		case len(p) == 5 && p[0] == "net" && p[2] == "ecn" && p[3] == "roce_np":
			nd := netdev(p[1])
			if nd.NPFiles == nil {
				nd.NPFiles = map[string]string{}
			}
			nd.NPFiles[p[4]] = content
		case len(p) == 5 && p[0] == "infiniband" && p[2] == "tc" && p[4] == "traffic_class":
			port, err := strconv.Atoi(p[3])
			if err != nil {
				t.Fatalf("%s: port %q", path, p[3])
			}
			d := spec.Device(p[1])
			if d == nil {
				spec.Devices = append(spec.Devices, sysfstest.Device{Name: p[1]})
				d = &spec.Devices[len(spec.Devices)-1]
			}
			if d.TrafficClass == nil {
				d.TrafficClass = map[int]string{}
			}
			d.TrafficClass[port] = content
		default:
			t.Fatalf("%s: no place for this file in the tree", path)
		}
	}
	return spec
}

// qos is what a capture's mlnx_qos lines say (the DCB netlink half, which a
// sysfs tree cannot give).
type qos struct {
	trust string
	pfc   []int       // priorities with PFC on
	dscp  map[int]int // DSCP -> priority, as far as the output lists it
}

// parseMlnxQos reads mlnx_qos's "Priority trust state", "prio:N dscp:..."
// and PFC "enabled" rows, in the tool's layout or condensed onto one line.
func parseMlnxQos(t *testing.T, lines []string) qos {
	t.Helper()
	q := qos{dscp: map[int]int{}}
	prioDSCP := regexp.MustCompile(`prio:(\d) dscp:([0-9,.]+)`)
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Priority trust state:"); ok {
			q.trust = strings.TrimSpace(v)
		}
		for _, m := range prioDSCP.FindAllStringSubmatch(l, -1) {
			prio, _ := strconv.Atoi(m[1])
			for _, d := range strings.Split(m[2], ",") {
				if n, err := strconv.Atoi(d); err == nil {
					q.dscp[n] = prio
				}
			}
		}
		f := strings.Fields(l)
		if i := slices.Index(f, "enabled"); i >= 0 && len(f)-i-1 == 8 {
			q.pfc = []int{}
			for p, s := range f[i+1:] {
				if s == "1" {
					q.pfc = append(q.pfc, p)
				} else if s != "0" {
					t.Fatalf("PFC row %q: %q is not 0 or 1", l, s)
				}
			}
		}
	}
	return q
}

func ip(v int) *int { return &v }

func eqIntp(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func eqPrios(a *[]int, b []int) bool { return a != nil && slices.Equal(*a, b) }

// TestRealConfigSpiderpoolQos replays spiderpool's `rdma-qos.sh q` output
// (eth0/mlx5_0): the ecn/ files and traffic_class it prints, built as a
// sysfs tree, must come back from collector's ConfigReader as printed.
func TestRealConfigSpiderpoolQos(t *testing.T) {
	c := loadConfigCapture(t, "spiderpool-eth0-mlx5_0-roce-qos.txt")
	root := t.TempDir()
	if err := sysfstest.Build(filepath.Join(root, "class"), c.spec(t)); err != nil {
		t.Fatal(err)
	}
	r := collector.NewConfigReader(root)
	cfg, err := r.Read(context.Background(), "eth0")
	// DCB is asked of this machine's kernel, whose eth0 (if any) is not
	// the captured one: only its failure is tolerated, and its fields
	// are not judged.
	if err != nil && !strings.Contains(err.Error(), "DCB of netdev eth0") {
		t.Fatalf("Read(eth0): %v", err)
	}
	if cfg == nil {
		t.Fatal("Read(eth0): no config")
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if !eqPrios(cfg.ECNNPEnabled, all) || !eqPrios(cfg.ECNRPEnabled, all) {
		t.Errorf("ECN np %v rp %v, want every priority (all 16 files print 1)", cfg.ECNNPEnabled, cfg.ECNRPEnabled)
	}
	if !eqIntp(cfg.CNPDSCP, ip(48)) {
		t.Errorf("cnp_dscp = %v, want 48", cfg.CNPDSCP)
	}
	if cfg.CNP8021pPrio != nil || cfg.MTU != nil {
		t.Errorf("cnp_802p_prio %v, mtu %v: not captured, want unknown (nil)", cfg.CNP8021pPrio, cfg.MTU)
	}
	tc, err := r.ReadTrafficClass("mlx5_0", 1)
	if err != nil || !eqIntp(tc, ip(160)) {
		t.Errorf("traffic_class of mlx5_0/1 = %v, %v; want 160 (\"Global tclass=160\")", tc, err)
	}
	// The DCB half, recorded: trust dscp, PFC on priority 5 only. The
	// forced class 160 is DSCP 40, priority 5 in mlx5's default DSCP map
	// (not printed here: 40/8), so the RoCE traffic is on the PFC priority.
	q := parseMlnxQos(t, c.quoted)
	if q.trust != "dscp" || !slices.Equal(q.pfc, []int{5}) {
		t.Errorf("mlnx_qos: trust %q, PFC %v; want dscp, [5]", q.trust, q.pfc)
	}
	if *tc>>2 != 40 {
		t.Errorf("tclass 160 >> 2 = %d, want DSCP 40", *tc>>2)
	}
}

// TestRealConfigNCCL2383TrafficClass replays the ConnectX-7 host of NCCL
// issue 2383: every RDMA device forces "Global tclass=236" (DSCP 59), and
// mlnx_qos on eth1 maps DSCP 59 to priority 5, the only PFC priority.
func TestRealConfigNCCL2383TrafficClass(t *testing.T) {
	c := loadConfigCapture(t, "cx7-roce-nccl2383-tclass.txt")
	root := t.TempDir()
	if err := sysfstest.Build(filepath.Join(root, "class"), c.spec(t)); err != nil {
		t.Fatal(err)
	}
	r := collector.NewConfigReader(root)
	for i := 1; i <= 8; i++ {
		dev := "mlx5_" + strconv.Itoa(i)
		tc, err := r.ReadTrafficClass(dev, 1)
		if err != nil || !eqIntp(tc, ip(236)) {
			t.Errorf("traffic_class of %s/1 = %v, %v; want 236", dev, tc, err)
		}
	}
	// No port 2 and no ecn/ files were captured: unknown, not an error.
	if tc, err := r.ReadTrafficClass("mlx5_1", 2); tc != nil || err != nil {
		t.Errorf("mlx5_1/2: %v, %v; want nil, nil", tc, err)
	}
	q := parseMlnxQos(t, c.quoted)
	if q.trust != "dscp" || !slices.Equal(q.pfc, []int{5}) {
		t.Errorf("mlnx_qos: trust %q, PFC %v; want dscp, [5]", q.trust, q.pfc)
	}
	if p, ok := q.dscp[236>>2]; !ok || p != 5 {
		t.Errorf("DSCP %d -> priority %d (listed %v), want 5", 236>>2, p, ok)
	}
}

// TestRealConfigCX5Sn2700MlnxQos records the ConnectX-5 mlnx_qos output of
// the SN2700 post: trust dscp, the default DSCP map (DSCP 26, the post's
// RoCE class 106 >> 2, on priority 3), PFC on priority 3 only, negotiated
// by DCBX. The capture has no sysfs value (the post writes traffic_class
// but never shows it read), so the sysfs reader has nothing to get: an
// empty tree gives no config and no error.
func TestRealConfigCX5Sn2700MlnxQos(t *testing.T) {
	c := loadConfigCapture(t, "cx5-sn2700-mce0-mlnx_qos.txt")
	if len(c.files) != 0 {
		t.Fatalf("%d sysfs files, want none", len(c.files))
	}
	q := parseMlnxQos(t, c.quoted)
	if q.trust != "dscp" || !slices.Equal(q.pfc, []int{3}) {
		t.Errorf("mlnx_qos: trust %q, PFC %v; want dscp, [3]", q.trust, q.pfc)
	}
	if len(q.dscp) != 64 {
		t.Errorf("dscp2prio lists %d DSCPs, want 64", len(q.dscp))
	}
	for d := range 64 {
		if q.dscp[d] != d/8 {
			t.Errorf("DSCP %d -> priority %d, want the default %d", d, q.dscp[d], d/8)
		}
	}
	if q.dscp[106>>2] != 3 {
		t.Errorf("DSCP 26 -> %d, want 3", q.dscp[106>>2])
	}
	root := t.TempDir()
	if err := sysfstest.Build(filepath.Join(root, "class"), c.spec(t)); err != nil {
		t.Fatal(err)
	}
	if tc, err := collector.NewConfigReader(root).ReadTrafficClass("mlx5_0", 1); tc != nil || err != nil {
		t.Errorf("traffic_class of mlx5_0/1 = %v, %v; want nil, nil (not captured)", tc, err)
	}
}

// TestRealConfigFilesListed keeps testdata/config and the nics README in
// step.
func TestRealConfigFilesListed(t *testing.T) {
	entries, err := os.ReadDir(configDir)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(nicsDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.Contains(string(readme), e.Name()) {
			t.Errorf("%s/%s is not listed in %s/README.md", configDir, e.Name(), nicsDir)
		}
		h, err := header(filepath.Join(configDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# source:", "# date:", "# licence:", "# edited:"} {
			if !slices.ContainsFunc(h, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("%s: the header has no %q line", e.Name(), want)
			}
		}
	}
}
