package corpus

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// fixture is one capture of the corpus and what the tests know of it.
type fixture struct {
	file   string // below nicsDir, or legacyCapture
	family string // the driver family of docs/formats.md's tables
	dumps  int    // how many dumps the file holds
	// detectors are the detectors whose inputs the capture carries, as a
	// collector reading exactly this would pass them on (see
	// detectorInputs). It is the record of what each real NIC feeds.
	detectors []string
}

var fixtures = []fixture{
	// mlx4 has no phy, pause or congestion counters in sysfs; its
	// sequence and error CQE counters are device-wide hw_counters.
	{file: "cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", family: "mlx4", dumps: 3,
		detectors: []string{"counter_saturated", "retransmissions"}},
	{file: "cx2-mlx4-roce-ubuntu18.04-4.15-counters.txt", family: "mlx4", dumps: 3,
		detectors: []string{"completion_errors", "counter_saturated", "retransmissions"}},
	{file: "cx2-mlx4_en-ubuntu18.04-4.15-ethtool.txt", family: "mlx4", dumps: 1},
	{file: "cx4lx-bond-ofed5-hw_counters.txt", family: "mlx5 LAG", dumps: 1,
		detectors: []string{"cnp_ecn_imbalance", "completion_errors", "receive_starvation", "retransmissions"}},
	{file: "cx4lx-bond-member-ofed5-ethtool.txt", family: "mlx5 LAG", dumps: 1},
	{file: "cx4lx-ofed5.0-hw_counters.txt", family: "MLNX_OFED 5.x", dumps: 1,
		detectors: []string{"cnp_ecn_imbalance", "completion_errors", "receive_starvation", "retransmissions"}},
	{file: "cx4lx-global-pause-ethtool.txt", family: "mlx5", dumps: 1,
		detectors: []string{"pfc_storm", "receive_starvation"}},
	{file: "cx4lx-upstream4.15-ethtool.txt", family: "mlx5 upstream <5.x", dumps: 1},
	{file: "mlx5-100g-ofed-ethtool.txt", family: "MLNX_OFED 5.x", dumps: 1,
		detectors: []string{"link_flap", "receive_starvation"}},
	// ConnectX-7 on NDR InfiniBand: an IB port's hw_counters have no
	// congestion counters.
	{file: "cx7-ib-ndr-counters.txt", family: "InfiniBand HCA", dumps: 1,
		detectors: []string{"ber_drift", "completion_errors", "counter_saturated", "link_flap", "receive_starvation", "retransmissions"}},
	{file: "mlx5-ib-pinned-counters.txt", family: "InfiniBand HCA", dumps: 1,
		detectors: []string{"counter_saturated", "link_flap"}},
	{file: "cx5-roce-prio-before-after-ethtool.txt", family: "mlx5", dumps: 2},
	{file: legacyCapture, family: "InfiniBand HCA", dumps: 1,
		detectors: []string{"ber_drift", "completion_errors", "counter_saturated", "link_flap", "receive_starvation", "retransmissions"}},
}

func fixturePath(f fixture) string {
	if f.file == legacyCapture {
		return legacyCapture
	}
	return filepath.Join(nicsDir, f.file)
}

func load(t *testing.T, f fixture) *capture {
	t.Helper()
	c, err := loadCapture(fixturePath(f))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCorpusFiles keeps the table and the folder in step: a capture added
// without a row here is never replayed, and every capture says where it
// comes from and when.
func TestCorpusFiles(t *testing.T) {
	entries, err := os.ReadDir(nicsDir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, f := range fixtures {
		listed[f.file] = true
	}
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		if !listed[e.Name()] {
			t.Errorf("%s/%s is not in the fixtures table: add it so the tests replay it", nicsDir, e.Name())
		}
	}
	readme, err := os.ReadFile(filepath.Join(nicsDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			if len(c.dumps) != f.dumps {
				t.Errorf("%d dumps, want %d", len(c.dumps), f.dumps)
			}
			for i, d := range c.dumps {
				if len(d.spec.Devices) == 0 && len(d.stats) == 0 {
					t.Errorf("dump %d (line %d) holds nothing", i, d.line)
				}
			}
			if f.file == legacyCapture {
				return
			}
			if !strings.Contains(string(readme), f.file) {
				t.Errorf("README.md does not list %s", f.file)
			}
			h, err := header(fixturePath(f))
			if err != nil {
				t.Fatal(err)
			}
			if len(h) == 0 || !strings.HasPrefix(h[0], "# source:") {
				t.Errorf("the first line must be \"# source: ...\", got %q", h)
			}
			for _, want := range []string{"# date:", "# licence:", "# edited:"} {
				if !slices.ContainsFunc(h, func(l string) bool { return strings.HasPrefix(l, want) }) {
					t.Errorf("the header has no %q line", want)
				}
			}
		})
	}
}

// byName are the counters real NICs list that rdmawatch does not number:
// they travel by name on the wire. The record of what the dictionary leaves
// out; a name in neither fails TestCorpusNames. Ring and channel counters
// (rx0_packets, tx11_bytes, ch0_poll) are listed once with N for the
// number, per-priority ones rdmawatch does not number with prioN.
var byName = map[schemas.Source][]string{
	schemas.SourceEthtool: {
		// mlx5 software port and ring counters
		"rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_tso_packets", "tx_tso_bytes", "tx_tso_inner_packets",
		"tx_tso_inner_bytes", "tx_added_vlan_packets", "tx_nop", "tx_mpwqe_blks", "tx_mpwqe_pkts", "rx_lro_packets",
		"rx_lro_bytes", "rx_ecn_mark", "rx_removed_vlan_packets", "rx_csum_unnecessary", "rx_csum_none", "rx_csum_complete",
		"rx_csum_complete_tail", "rx_csum_complete_tail_slow", "rx_csum_unnecessary_inner", "rx_xdp_drop", "rx_xdp_redirect",
		"rx_xdp_tx", "rx_xdp_tx_xmit", "rx_xdp_tx_mpwqe", "rx_xdp_tx_inlnw", "rx_xdp_tx_nops", "rx_xdp_tx_full", "rx_xdp_tx_err",
		"rx_xdp_tx_cqe", "tx_csum_none", "tx_csum_partial", "tx_csum_partial_inner", "tx_queue_stopped", "tx_queue_dropped",
		"tx_xmit_more", "tx_recover", "tx_cqes", "tx_queue_wake", "tx_cqe_err", "tx_xdp_xmit", "tx_xdp_mpwqe", "tx_xdp_inlnw",
		"tx_xdp_nops", "tx_xdp_full", "tx_xdp_err", "tx_xdp_cqes", "tx_cqe_compress_blks", "tx_cqe_compress_pkts", "rx_wqe_err",
		"rx_mpwqe_filler_cqes", "rx_mpwqe_filler_strides", "rx_oversize_pkts_sw_drop", "rx_buff_alloc_err",
		"rx_cqe_compress_blks", "rx_cqe_compress_pkts", "rx_cache_reuse", "rx_cache_full", "rx_cache_empty", "rx_cache_busy",
		"rx_cache_ext", "rx_cache_rdc", "rx_cache_alloc", "rx_cache_waive", "rx_congst_umr", "rx_arfs_err", "rx_recover",
		"rx_pet_hdr_lookup_drop", "rx_pet_mdata_lookup_drop", "ch_events", "ch_poll", "ch_arm", "ch_aff_change",
		"ch_force_irq", "ch_eq_rearm", "rx_xsk_packets", "rx_xsk_bytes", "rx_xsk_csum_complete", "rx_xsk_csum_unnecessary",
		"rx_xsk_csum_unnecessary_inner", "rx_xsk_csum_none", "rx_xsk_ecn_mark", "rx_xsk_removed_vlan_packets",
		"rx_xsk_xdp_drop", "rx_xsk_xdp_redirect", "rx_xsk_wqe_err", "rx_xsk_mpwqe_filler_cqes", "rx_xsk_mpwqe_filler_strides",
		"rx_xsk_oversize_pkts_sw_drop", "rx_xsk_buff_alloc_err", "rx_xsk_cqe_compress_blks", "rx_xsk_cqe_compress_pkts",
		"rx_xsk_congst_umr", "rx_xsk_arfs_err", "tx_xsk_xmit", "tx_xsk_mpwqe", "tx_xsk_inlnw", "tx_xsk_full", "tx_xsk_err",
		"tx_xsk_cqes", "rx_if_down_packets", "rx_steer_missed_packets", "dev_internal_queue_oob",
		"chN_events", "chN_poll", "chN_arm", "chN_aff_change", "chN_force_irq", "chN_eq_rearm",
		"rxN_packets", "rxN_bytes", "rxN_csum_complete", "rxN_csum_complete_tail", "rxN_csum_complete_tail_slow",
		"rxN_csum_unnecessary", "rxN_csum_unnecessary_inner", "rxN_csum_none", "rxN_xdp_drop", "rxN_xdp_redirect",
		"rxN_lro_packets", "rxN_lro_bytes", "rxN_ecn_mark", "rxN_removed_vlan_packets", "rxN_wqe_err",
		"rxN_mpwqe_filler_cqes", "rxN_mpwqe_filler_strides", "rxN_oversize_pkts_sw_drop", "rxN_buff_alloc_err",
		"rxN_cqe_compress_blks", "rxN_cqe_compress_pkts", "rxN_cache_reuse", "rxN_cache_full", "rxN_cache_empty",
		"rxN_cache_busy", "rxN_cache_waive", "rxN_cache_ext", "rxN_cache_rdc", "rxN_cache_alloc", "rxN_congst_umr",
		"rxN_arfs_err", "rxN_recover", "rxN_pet_hdr_lookup_drop", "rxN_pet_mdata_lookup_drop", "rxN_xdp_tx_xmit",
		"rxN_xdp_tx_mpwqe", "rxN_xdp_tx_inlnw", "rxN_xdp_tx_nops", "rxN_xdp_tx_full", "rxN_xdp_tx_err", "rxN_xdp_tx_cqes",
		"txN_packets", "txN_bytes", "txN_tso_packets", "txN_tso_bytes", "txN_tso_inner_packets", "txN_tso_inner_bytes",
		"txN_csum_partial", "txN_csum_partial_inner", "txN_added_vlan_packets", "txN_nop", "txN_mpwqe_blks",
		"txN_mpwqe_pkts", "txN_csum_none", "txN_stopped", "txN_dropped", "txN_xmit_more", "txN_recover", "txN_cqes",
		"txN_cqe_compress_blks", "txN_cqe_compress_pkts", "txN_wake", "txN_cqe_err", "txN_xdp_xmit", "txN_xdp_mpwqe",
		"txN_xdp_inlnw", "txN_xdp_nops", "txN_xdp_full", "txN_xdp_err", "txN_xdp_cqes",
		// mlx5 vport counters (the bond members carry the RDMA ones)
		"rx_vport_unicast_packets", "rx_vport_unicast_bytes", "tx_vport_unicast_packets", "tx_vport_unicast_bytes",
		"rx_vport_multicast_packets", "rx_vport_multicast_bytes", "tx_vport_multicast_packets", "tx_vport_multicast_bytes",
		"rx_vport_broadcast_packets", "rx_vport_broadcast_bytes", "tx_vport_broadcast_packets", "tx_vport_broadcast_bytes",
		"rx_vport_rdma_unicast_packets", "rx_vport_rdma_unicast_bytes", "tx_vport_rdma_unicast_packets",
		"tx_vport_rdma_unicast_bytes", "rx_vport_rdma_multicast_packets", "rx_vport_rdma_multicast_bytes",
		"tx_vport_rdma_multicast_packets", "tx_vport_rdma_multicast_bytes",
		// mlx5 physical port counters rdmawatch does not number
		"tx_multicast_phy", "tx_broadcast_phy", "rx_multicast_phy", "rx_broadcast_phy", "rx_out_of_range_len_phy",
		"rx_oversize_pkts_phy", "tx_mac_control_phy", "rx_mac_control_phy", "rx_unsupported_op_phy", "tx_errors_phy",
		"rx_undersize_pkts_phy", "rx_fragments_phy", "rx_jabbers_phy", "rx_64_bytes_phy", "rx_65_to_127_bytes_phy",
		"rx_128_to_255_bytes_phy", "rx_256_to_511_bytes_phy", "rx_512_to_1023_bytes_phy", "rx_1024_to_1518_bytes_phy",
		"rx_1519_to_2047_bytes_phy", "rx_2048_to_4095_bytes_phy", "rx_4096_to_8191_bytes_phy", "rx_8192_to_10239_bytes_phy",
		"rx_pci_signal_integrity", "tx_pci_signal_integrity", "outbound_pci_stalled_rd", "outbound_pci_stalled_wr",
		"outbound_pci_stalled_rd_events", "outbound_pci_stalled_wr_events", "module_unplug", "module_bus_stuck",
		"module_high_temp", "module_bad_shorted",
		// mlx5 per-priority counters rdmawatch does not number
		"rx_prioN_packets", "tx_prioN_packets", "rx_prioN_discards",
		// mlx4_en
		"tx_errors", "tx_dropped", "multicast", "collisions", "rx_length_errors", "rx_over_errors", "rx_frame_errors",
		"rx_fifo_errors", "rx_missed_errors", "tx_aborted_errors", "tx_carrier_errors", "tx_fifo_errors",
		"tx_heartbeat_errors", "tx_window_errors", "tso_packets", "xmit_more", "queue_stopped", "wake_queue", "tx_timeout",
		"rx_alloc_pages", "rx_csum_good", "tx_chksum_offload", "rx_multicast_packets", "rx_broadcast_packets",
		"rx_jabbers", "rx_in_range_length_error", "rx_out_range_length_error", "tx_multicast_packets",
		"tx_broadcast_packets", "rx_prio_N_packets", "rx_prio_N_bytes", "tx_prio_N_packets", "tx_prio_N_bytes",
		"rx_novlan_packets", "rx_novlan_bytes", "tx_novlan_packets", "tx_novlan_bytes", "rxN_dropped", "rxN_xdp_tx",
	},
}

var (
	ringName = regexp.MustCompile(`^(rx|tx|ch)[0-9]+_`)
	prioName = regexp.MustCompile(`prio(_?)[0-7]_`)
)

// normalise maps a ring, channel or priority counter to its byName form.
func normalise(name string) string {
	name = ringName.ReplaceAllString(name, "${1}N_")
	return prioName.ReplaceAllString(name, "prio${1}N_")
}

// TestCorpusNames checks every name a real NIC listed is either numbered
// by the dictionary, a gauge, or recorded in byName, and that byName holds
// nothing stale (a name the dictionary numbers now, or no capture lists).
func TestCorpusNames(t *testing.T) {
	used := map[schemas.Source]map[string]bool{}
	for src, names := range byName {
		used[src] = map[string]bool{}
		for _, n := range names {
			used[src][n] = false
		}
	}
	check := func(t *testing.T, where string, src schemas.Source, name string) {
		if _, ok := schemas.LookupCounterID(src, name); ok {
			return
		}
		if schemas.KindOf(src, name) == schemas.Gauge {
			return
		}
		n := normalise(name)
		if _, ok := used[src][n]; ok {
			used[src][n] = true
			return
		}
		t.Errorf("%s: %s %q is neither in the counter dictionary nor in byName (as %q): a real NIC lists it; number it in schemas/dict.go or record it in byName", where, src, name, n)
	}
	for _, f := range fixtures {
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			for i, d := range c.dumps {
				for _, pr := range readings(t, c, d, time.Unix(0, 0)) {
					for _, sc := range counterList(pr) {
						check(t, fmt.Sprintf("dump %d %s", i, portKey(pr.Device, pr.Port, pr.Netdev)), sc.src, sc.name)
					}
				}
				for dev, m := range d.devHW {
					for _, name := range sortedKeys(m) {
						check(t, "dump "+fmt.Sprint(i)+" "+dev+"/hw_counters", schemas.SourceHWCounters, name)
					}
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	for src, names := range byName {
		for _, n := range names {
			if _, ok := schemas.LookupCounterID(src, n); ok {
				t.Errorf("byName lists %s %q, which the dictionary numbers now: drop it", src, n)
			}
			if !used[src][n] {
				t.Errorf("byName lists %s %q, which no capture has: drop it or add the capture", src, n)
			}
		}
	}
}

// TestCorpusWidths checks every real value fits the width schemas.KindOf
// gives its counter, and pins the widths issue 25 is about to the values
// that showed them.
func TestCorpusWidths(t *testing.T) {
	for _, f := range fixtures {
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			for i, d := range c.dumps {
				for _, pr := range readings(t, c, d, time.Unix(0, 0)) {
					for _, sc := range counterList(pr) {
						k := schemas.KindOf(sc.src, sc.name)
						if sc.value > k.Max() {
							t.Errorf("dump %d %s: %s %s reads %d, above the %s maximum %d: KindOf is wrong for real hardware",
								i, portKey(pr.Device, pr.Port, pr.Netdev), sc.src, sc.name, sc.value, k, k.Max())
						}
					}
				}
				for dev, m := range d.devHW {
					for name, v := range m {
						if k := schemas.KindOf(schemas.SourceHWCounters, name); v > k.Max() {
							t.Errorf("dump %d %s/hw_counters/%s reads %d, above the %s maximum", i, dev, name, v, k)
						}
					}
				}
			}
		})
	}

	tests := []struct {
		file, device string
		port         int
		src          schemas.Source
		name         string
		kind         schemas.Kind
		value        uint64
	}{
		// 64-bit congestion counters: real ports read above 2^32.
		{"cx4lx-bond-ofed5-hw_counters.txt", "mlx5_bond_0", 1, schemas.SourceHWCounters, "np_ecn_marked_roce_packets", schemas.Counter64, 21278189006},
		{"cx4lx-bond-ofed5-hw_counters.txt", "mlx5_bond_0", 1, schemas.SourceHWCounters, "np_cnp_sent", schemas.Counter64, 1052612505},
		// q-counters stay 32-bit.
		{"cx4lx-bond-ofed5-hw_counters.txt", "mlx5_bond_0", 1, schemas.SourceHWCounters, "out_of_sequence", schemas.Wrap32, 1811101},
		{"cx4lx-bond-ofed5-hw_counters.txt", "mlx5_bond_0", 1, schemas.SourceHWCounters, "rx_write_requests", schemas.Wrap32, 2402134794},
		{"cx4lx-ofed5.0-hw_counters.txt", "mlx5_0", 1, schemas.SourceHWCounters, "out_of_buffer", schemas.Wrap32, 135},
		// mlx4 on a 4.15 kernel reads the extended (64-bit) data counters.
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", "mlx4_0", 1, schemas.SourceCounters, "port_xmit_data", schemas.Ext64Sat32, 16614976221},
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", "mlx4_0", 2, schemas.SourceCounters, "port_xmit_wait", schemas.Sat32, 49578},
		{legacyCapture, "mlx4_0", 1, schemas.SourceCounters, "port_xmit_wait", schemas.Sat32, 3599},
		{legacyCapture, "mlx5_0", 1, schemas.SourceCounters, "port_xmit_data", schemas.Ext64Sat32, 2880761508848},
		// ConnectX-7 on NDR InfiniBand: 64-bit data counters, a 32-bit
		// q-counter close to its wrap, port_xmit_wait below its pin.
		{"cx7-ib-ndr-counters.txt", "mlx5_0", 1, schemas.SourceCounters, "port_xmit_data", schemas.Ext64Sat32, 230442669431839},
		{"cx7-ib-ndr-counters.txt", "mlx5_0", 1, schemas.SourceCounters, "port_xmit_wait", schemas.Sat32, 2489603687},
		{"cx7-ib-ndr-counters.txt", "mlx5_0", 1, schemas.SourceHWCounters, "rx_write_requests", schemas.Wrap32, 3809045607},
		// An mlx5 IB port whose PMA PortCounters fields stuck at their
		// maxima while the extended data counters went on.
		{"mlx5-ib-pinned-counters.txt", "mlx5_1", 1, schemas.SourceCounters, "port_xmit_wait", schemas.Sat32, 4294967295},
		{"mlx5-ib-pinned-counters.txt", "mlx5_1", 1, schemas.SourceCounters, "port_xmit_discards", schemas.Sat16, 65535},
		{"mlx5-ib-pinned-counters.txt", "mlx5_1", 1, schemas.SourceCounters, "link_downed", schemas.Sat8, 255},
		{"mlx5-ib-pinned-counters.txt", "mlx5_1", 1, schemas.SourceCounters, "excessive_buffer_overrun_errors", schemas.Sat4, 15},
		{"mlx5-ib-pinned-counters.txt", "mlx5_1", 1, schemas.SourceCounters, "port_rcv_data", schemas.Ext64Sat32, 205128687774249},
	}
	for _, tc := range tests {
		t.Run(tc.name+"@"+tc.file, func(t *testing.T) {
			f := fixtureByFile(t, tc.file)
			c := load(t, f)
			pr := findReading(t, readings(t, c, c.dumps[0], time.Unix(0, 0)), tc.device, tc.port)
			v, ok := valueOf(pr, tc.src, tc.name)
			if !ok || v != tc.value {
				t.Fatalf("%s %s = %d (read %v), want the captured %d", tc.src, tc.name, v, ok, tc.value)
			}
			if k := schemas.KindOf(tc.src, tc.name); k != tc.kind {
				t.Errorf("KindOf(%s, %s) = %s, want %s", tc.src, tc.name, k, tc.kind)
			}
		})
	}
}

func fixtureByFile(t *testing.T, file string) fixture {
	t.Helper()
	for _, f := range fixtures {
		if f.file == file {
			return f
		}
	}
	t.Fatalf("no fixture %s", file)
	return fixture{}
}

func findReading(t *testing.T, prs []collector.PortReading, device string, port int) collector.PortReading {
	t.Helper()
	for _, pr := range prs {
		if pr.Device == device && pr.Port == port {
			return pr
		}
	}
	t.Fatalf("no reading of %s port %d", device, port)
	return collector.PortReading{}
}

func valueOf(pr collector.PortReading, src schemas.Source, name string) (uint64, bool) {
	m := map[schemas.Source]map[string]uint64{schemas.SourceCounters: pr.Counters, schemas.SourceHWCounters: pr.HWCounters, schemas.SourceEthtool: pr.Ethtool}[src]
	v, ok := m[name]
	return v, ok
}

// sampleOf finds a port's sample in a batch.
func sampleOf(t *testing.T, b *schemas.CounterBatch, device string, port int, netdev string) *schemas.PortSample {
	t.Helper()
	if b == nil {
		t.Fatalf("no batch for %s", portKey(device, port, netdev))
	}
	for i := range b.Ports {
		p := &b.Ports[i]
		if p.Device == device && p.Port == port && p.Netdev == netdev {
			return p
		}
	}
	t.Fatalf("no sample of %s in the batch", portKey(device, port, netdev))
	return nil
}

func deltaOf(p *schemas.PortSample, src schemas.Source, name string) (schemas.CounterDelta, bool) {
	return p.Counter(src, name)
}

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCorpusPairedDeltas feeds captures holding several dumps through the
// delta engine: every delta must be the difference of the two readings
// (x4 for the data counters, which count 4-byte words), with no flag; a
// counter a partial capture lists only from the second dump on comes back
// as a baseline. The deltas the capturing tool printed are checked too.
func TestCorpusPairedDeltas(t *testing.T) {
	for _, f := range fixtures {
		if f.dumps < 2 {
			continue
		}
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			e := collector.NewEngine(nil)
			var prev []collector.PortReading
			for i, d := range c.dumps {
				at := base.Add(d.at)
				prs := readings(t, c, d, at)
				b := e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: prs})
				for _, pr := range prs {
					p := sampleOf(t, b, pr.Device, pr.Port, pr.Netdev)
					var before *collector.PortReading
					for j := range prev {
						if prev[j].Device == pr.Device && prev[j].Port == pr.Port && prev[j].Netdev == pr.Netdev {
							before = &prev[j]
						}
					}
					if before != nil {
						if want := (d.at - c.dumps[i-1].at).Milliseconds(); p.IntervalMs != want {
							t.Errorf("dump %d %s: interval %d ms, want %d", i, portKey(pr.Device, pr.Port, pr.Netdev), p.IntervalMs, want)
						}
					}
					for _, sc := range counterList(pr) {
						if schemas.KindOf(sc.src, sc.name) == schemas.Gauge {
							continue
						}
						cd, ok := deltaOf(p, sc.src, sc.name)
						if !ok {
							t.Errorf("dump %d %s: %s %s missing from the sample", i, portKey(pr.Device, pr.Port, pr.Netdev), sc.src, sc.name)
							continue
						}
						old, had := uint64(0), false
						if before != nil {
							old, had = valueOf(*before, sc.src, sc.name)
						}
						if !had {
							if cd.Flags&schemas.FlagFirst == 0 || cd.Delta != 0 {
								t.Errorf("dump %d %s: %s %s first listed here: delta %d flags %05b, want a baseline", i, portKey(pr.Device, pr.Port, pr.Netdev), sc.src, sc.name, cd.Delta, cd.Flags)
							}
							continue
						}
						want := sc.value - old
						if schemas.WordsToBytes(sc.src, sc.name) {
							want *= 4
						}
						if cd.Delta != want || cd.Flags != 0 {
							t.Errorf("dump %d %s: %s %s %d -> %d: delta %d flags %05b, want delta %d and no flag",
								i, portKey(pr.Device, pr.Port, pr.Netdev), sc.src, sc.name, old, sc.value, cd.Delta, cd.Flags, want)
						}
					}
				}
				prev = prs
			}
		})
	}

	// The capturing tool's own deltas, from the notes: the engine must find
	// the same (in bytes for the data counters).
	printed := []struct {
		file   string
		dump   int
		device string
		port   int
		name   string
		delta  uint64
	}{
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", 1, "mlx4_0", 1, "port_xmit_data", 4 * 4118992475},
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", 1, "mlx4_0", 1, "port_xmit_wait", 4995058},
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", 1, "mlx4_0", 1, "port_rcv_data", 4 * 4159806221},
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", 2, "mlx4_0", 2, "port_rcv_data", 4 * 4205823989},
		{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", 2, "mlx4_0", 2, "port_xmit_wait", 20835},
		{"cx2-mlx4-roce-ubuntu18.04-4.15-counters.txt", 1, "mlx4_0", 1, "port_xmit_data", 4 * 2539475153},
		{"cx2-mlx4-roce-ubuntu18.04-4.15-counters.txt", 2, "mlx4_0", 1, "port_xmit_data", 4 * 3062929723},
		{"cx2-mlx4-roce-ubuntu18.04-4.15-counters.txt", 2, "mlx4_0", 2, "port_xmit_packets", 11199239},
	}
	for _, tc := range printed {
		t.Run(fmt.Sprintf("printed/%s/dump%d/%s/%d/%s", tc.file, tc.dump, tc.device, tc.port, tc.name), func(t *testing.T) {
			c := load(t, fixtureByFile(t, tc.file))
			e := collector.NewEngine(nil)
			var b *schemas.CounterBatch
			for i := 0; i <= tc.dump; i++ {
				at := base.Add(c.dumps[i].at)
				b = e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: readings(t, c, c.dumps[i], at)})
			}
			cd, ok := deltaOf(sampleOf(t, b, tc.device, tc.port, ""), schemas.SourceCounters, tc.name)
			if !ok || cd.Delta != tc.delta || cd.Flags != 0 {
				t.Fatalf("%s delta %d flags %05b (present %v), want %d as the notes print it", tc.name, cd.Delta, cd.Flags, ok, tc.delta)
			}
		})
	}
}

// TestCorpusEthtoolPairDeltas: the ConnectX-5 greps before and after a
// benchmark run; the engine's deltas must be the differences of the
// published values (worked out in the file's header), unflagged.
func TestCorpusEthtoolPairDeltas(t *testing.T) {
	c := load(t, fixtureByFile(t, "cx5-roce-prio-before-after-ethtool.txt"))
	e := collector.NewEngine(nil)
	var b *schemas.CounterBatch
	var prs []collector.PortReading
	for i := range 2 {
		at := base.Add(c.dumps[i].at)
		prs = readings(t, c, c.dumps[i], at)
		b = e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: prs})
	}
	if len(prs) != 1 {
		t.Fatalf("%d readings, want enp178s0f0 alone", len(prs))
	}
	p := sampleOf(t, b, prs[0].Device, prs[0].Port, "enp178s0f0")
	for name, want := range map[string]uint64{
		"rx_prio0_bytes": 136571931490, "rx_prio0_packets": 126736411,
		"tx_prio0_bytes": 136566416532, "tx_prio0_packets": 126724196,
		"rx_prio3_bytes": 0, "tx_prio4_bytes": 0,
	} {
		cd, ok := deltaOf(p, schemas.SourceEthtool, name)
		if !ok || cd.Delta != want || cd.Flags != 0 {
			t.Errorf("%s: delta %d flags %05b (present %v), want %d", name, cd.Delta, cd.Flags, ok, want)
		}
	}
	// Cut from the second grep: not in the sample at all, rather than a
	// delta against nothing.
	if cd, ok := deltaOf(p, schemas.SourceEthtool, "tx_prio7_packets"); ok {
		t.Errorf("tx_prio7_packets, absent from the second dump, came out as %+v", cd)
	}
}

// TestCorpusPinnedPMA replays the mlx5 IB port whose PortCounters fields
// read their maxima: read twice unchanged (they cannot move), the pinned
// ones must come out FlagSaturated with no delta, the 64-bit data and
// packet counters beside them must not.
func TestCorpusPinnedPMA(t *testing.T) {
	c := load(t, fixtureByFile(t, "mlx5-ib-pinned-counters.txt"))
	e := collector.NewEngine(nil)
	var b *schemas.CounterBatch
	for i := range 2 {
		at := base.Add(time.Duration(i) * 10 * time.Second)
		b = e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: readings(t, c, c.dumps[0], at)})
	}
	p := sampleOf(t, b, "mlx5_1", 1, "")
	for _, name := range []string{"port_xmit_wait", "port_xmit_discards", "link_downed", "excessive_buffer_overrun_errors"} {
		cd, ok := deltaOf(p, schemas.SourceCounters, name)
		if !ok || cd.Flags&schemas.FlagSaturated == 0 || cd.Delta != 0 {
			t.Errorf("%s = %d: delta %d flags %05b (present %v), want pinned", name, cd.Value, cd.Delta, cd.Flags, ok)
		}
	}
	for _, name := range []string{"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_switch_relay_errors"} {
		if cd, _ := deltaOf(p, schemas.SourceCounters, name); cd.Flags&schemas.FlagSaturated != 0 {
			t.Errorf("%s = %d came out saturated", name, cd.Value)
		}
	}
}

// increment is what TestCorpusSingleDeltas adds to a counter between the
// captured reading and the synthetic one 10 s later: small, and different
// per name so a swapped counter shows.
func increment(name string) uint64 { return uint64(len(name)) + 1 }

// bumped is a counter's value after increment, and whether that pins it:
// a saturating counter (4-bit local_link_integrity_errors, ...) goes up by
// one at most and stops at its maximum, as the hardware does.
func bumped(src schemas.Source, name string, v uint64) (next uint64, pinned bool) {
	k := schemas.KindOf(src, name)
	if !k.Saturating() {
		return v + increment(name), false
	}
	next = min(v+1, k.Max())
	return next, next == k.Max()
}

// TestCorpusSingleDeltas feeds each captured dump, then the same dump with
// every counter a little higher 10 s later: every delta must be that
// increment (x4 for the data counters), unflagged, whatever the captured
// value, e.g. a 64-bit congestion counter read above 2^34 must not come out
// wrapped or reset.
func TestCorpusSingleDeltas(t *testing.T) {
	for _, f := range fixtures {
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			d := c.dumps[len(c.dumps)-1]
			e := collector.NewEngine(nil)
			prs := readings(t, c, d, base)
			if b := e.Apply(&collector.Reading{Node: "corpus", Time: base, Ports: prs}); b == nil {
				t.Fatal("the captured dump gave no sample")
			}
			later := base.Add(10 * time.Second)
			next := make([]collector.PortReading, len(prs))
			for i, pr := range prs {
				next[i] = pr
				next[i].Time = later
				bump := func(m map[string]uint64, src schemas.Source) map[string]uint64 {
					if m == nil {
						return nil
					}
					out := make(map[string]uint64, len(m))
					for name, v := range m {
						if schemas.KindOf(src, name) == schemas.Gauge {
							out[name] = v
							continue
						}
						out[name], _ = bumped(src, name, v)
					}
					return out
				}
				next[i].Counters = bump(pr.Counters, schemas.SourceCounters)
				next[i].HWCounters = bump(pr.HWCounters, schemas.SourceHWCounters)
				next[i].Ethtool = bump(pr.Ethtool, schemas.SourceEthtool)
			}
			b := e.Apply(&collector.Reading{Node: "corpus", Time: later, Ports: next})
			n := 0
			for _, pr := range next {
				p := sampleOf(t, b, pr.Device, pr.Port, pr.Netdev)
				if p.IntervalMs != 10000 {
					t.Errorf("%s: interval %d ms, want 10000", portKey(pr.Device, pr.Port, pr.Netdev), p.IntervalMs)
				}
				for _, sc := range counterList(pr) {
					if schemas.KindOf(sc.src, sc.name) == schemas.Gauge {
						if v, ok := p.Gauges[sc.name]; !ok || v != sc.value {
							t.Errorf("%s: gauge %s = %d (present %v), want %d", portKey(pr.Device, pr.Port, pr.Netdev), sc.name, v, ok, sc.value)
						}
						continue
					}
					n++
					cd, ok := deltaOf(p, sc.src, sc.name)
					before, _ := valueOf(prs[slices.IndexFunc(prs, func(x collector.PortReading) bool {
						return x.Device == pr.Device && x.Port == pr.Port && x.Netdev == pr.Netdev
					})], sc.src, sc.name)
					want, wantFlags := sc.value-before, schemas.Flag(0)
					if _, pinned := bumped(sc.src, sc.name, before); pinned {
						wantFlags = schemas.FlagSaturated
					}
					if schemas.WordsToBytes(sc.src, sc.name) {
						want *= 4
					}
					if !ok || cd.Delta != want || cd.Flags != wantFlags {
						t.Errorf("%s: %s %s from %d: delta %d flags %05b (present %v), want delta %d and no flag",
							portKey(pr.Device, pr.Port, pr.Netdev), sc.src, sc.name, before, cd.Delta, cd.Flags, ok, want)
					}
				}
			}
			if n == 0 {
				t.Error("no counter was checked")
			}
		})
	}
}

// TestCorpusMlx4PinnedData: on an older kernel the same ConnectX-2's
// port_rcv_data and port_xmit_data "stick with a max value of 4294967295,
// i.e. treated as 32-bit rather than 64-bit counters" (the notes of the
// cx2-mlx4 captures; CentOS 6, kernel 3.10.33). No dump of that host was
// published, so the captured 4.15 reading is replayed with the data
// counters at that value: they must come out pinned (FlagSaturated) with
// no delta, and the 4.15 kernel's real 64-bit values must not.
func TestCorpusMlx4PinnedData(t *testing.T) {
	c := load(t, fixtureByFile(t, "cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt"))
	real := findReading(t, readings(t, c, c.dumps[0], base), "mlx4_0", 1)
	pinned := func(at time.Time) collector.PortReading {
		pr := real
		pr.Time = at
		pr.Counters = map[string]uint64{}
		for k, v := range real.Counters {
			pr.Counters[k] = v
		}
		pr.Counters["port_xmit_data"] = math.MaxUint32
		pr.Counters["port_rcv_data"] = math.MaxUint32
		return pr
	}
	e := collector.NewEngine(nil)
	b := e.Apply(&collector.Reading{Node: "corpus", Time: base, Ports: []collector.PortReading{real}})
	for _, name := range []string{"port_xmit_data", "port_rcv_data"} {
		if cd, _ := deltaOf(sampleOf(t, b, "mlx4_0", 1, ""), schemas.SourceCounters, name); cd.Flags&schemas.FlagSaturated != 0 {
			t.Errorf("the real 64-bit %s = %d came out saturated", name, cd.Value)
		}
	}
	e = collector.NewEngine(nil)
	for i := range 2 {
		at := base.Add(time.Duration(i) * 10 * time.Second)
		b := e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: []collector.PortReading{pinned(at)}})
		p := sampleOf(t, b, "mlx4_0", 1, "")
		for _, name := range []string{"port_xmit_data", "port_rcv_data"} {
			cd, _ := deltaOf(p, schemas.SourceCounters, name)
			if cd.Flags&schemas.FlagSaturated == 0 || cd.Delta != 0 {
				t.Errorf("reading %d: %s at 4294967295: delta %d flags %05b, want pinned (FlagSaturated) and no delta", i, name, cd.Delta, cd.Flags)
			}
		}
		// port_xmit_wait is read at its real value: it moves.
		if cd, _ := deltaOf(p, schemas.SourceCounters, "port_xmit_wait"); cd.Flags&schemas.FlagSaturated != 0 {
			t.Errorf("reading %d: port_xmit_wait %d saturated", i, cd.Value)
		}
	}
}

// TestCorpusFigures computes schemas.PortFigures on samples made from the
// captures, where a figure has its inputs.
func TestCorpusFigures(t *testing.T) {
	t.Run("mlx4 InfiniBand throughput from the paired dumps", func(t *testing.T) {
		c := load(t, fixtureByFile(t, "cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt"))
		e := collector.NewEngine(nil)
		var b *schemas.CounterBatch
		for i := range 2 {
			at := base.Add(c.dumps[i].at)
			b = e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: readings(t, c, c.dumps[i], at)})
		}
		f := schemas.PortFigures(sampleOf(t, b, "mlx4_0", 1, ""))
		// 4159806221 and 4118992475 words in 10 s (the notes' deltas).
		wantRcv := 4159806221.0 * 4 * 8 / 10 / 1e9
		wantXmit := 4118992475.0 * 4 * 8 / 10 / 1e9
		if math.Abs(f.RcvGbps-wantRcv) > 1e-9 || math.Abs(f.XmitGbps-wantXmit) > 1e-9 {
			t.Errorf("rcv %.6f xmit %.6f Gb/s, want %.6f and %.6f", f.RcvGbps, f.XmitGbps, wantRcv, wantXmit)
		}
		if f.RateGbps != 40 || math.Abs(f.Utilisation-wantRcv/40) > 1e-12 {
			t.Errorf("rate %v utilisation %v, want 40 and %v", f.RateGbps, f.Utilisation, wantRcv/40)
		}
		if f.SymbolBER != 0 || f.PreFECBER != 0 {
			t.Errorf("symbol BER %g pre-FEC %g: the partial capture lists no symbol_error, so no BER", f.SymbolBER, f.PreFECBER)
		}
	})

	// single builds a sample from a capture's ethtool dump and the same
	// dump plus the given increments 10 s later, on a port of the given
	// rate (not in an ethtool capture: it is sysfs's).
	single := func(t *testing.T, file, rate string, inc map[string]uint64) *schemas.PortSample {
		t.Helper()
		c := load(t, fixtureByFile(t, file))
		prs := readings(t, c, c.dumps[0], base)
		if len(prs) != 1 {
			t.Fatalf("%d readings, want one port", len(prs))
		}
		pr := prs[0]
		pr.Rate = rate
		e := collector.NewEngine(nil)
		e.Apply(&collector.Reading{Node: "corpus", Time: base, Ports: []collector.PortReading{pr}})
		next := pr
		next.Time = base.Add(10 * time.Second)
		next.Ethtool = map[string]uint64{}
		for k, v := range pr.Ethtool {
			next.Ethtool[k] = v + inc[k]
		}
		for k := range inc {
			if _, ok := pr.Ethtool[k]; !ok {
				t.Fatalf("%s is not in the capture", k)
			}
		}
		b := e.Apply(&collector.Reading{Node: "corpus", Time: next.Time, Ports: []collector.PortReading{next}})
		return sampleOf(t, b, pr.Device, pr.Port, pr.Netdev)
	}

	t.Run("pre-FEC BER over the link rate on a port without rx_bits_phy", func(t *testing.T) {
		p := single(t, "mlx5-100g-ofed-ethtool.txt", "100 Gb/sec (4X EDR)",
			map[string]uint64{"rx_corrected_bits_phy": 1000, "rx_pcs_symbol_err_phy": 1})
		if _, ok := p.Counter(schemas.SourceEthtool, "rx_bits_phy"); ok {
			t.Fatal("the capture lists rx_bits_phy; this case is about ports that do not")
		}
		bits, src := schemas.EthernetPHYBits(p)
		if src != schemas.PHYBitsLineRate || bits != 1e12 {
			t.Fatalf("PHY bits %g from %s, want 1e12 from the link rate", bits, src)
		}
		f := schemas.PortFigures(p)
		if math.Abs(f.PreFECBER-1e-9) > 1e-21 || math.Abs(f.PostFECBER-1e-12) > 1e-24 {
			t.Errorf("pre-FEC BER %g post-FEC %g, want 1e-9 and 1e-12", f.PreFECBER, f.PostFECBER)
		}
	})
	t.Run("no rate, no rx_bits_phy: no BER rather than a guess", func(t *testing.T) {
		p := single(t, "mlx5-100g-ofed-ethtool.txt", "", map[string]uint64{"rx_corrected_bits_phy": 1000})
		if f := schemas.PortFigures(p); f.PreFECBER != 0 {
			t.Errorf("pre-FEC BER %g without a rate or rx_bits_phy", f.PreFECBER)
		}
	})
	t.Run("IEEE 802.3x global pause gives the pause fractions", func(t *testing.T) {
		p := single(t, "cx4lx-global-pause-ethtool.txt", "25 Gb/sec (1X EDR)",
			map[string]uint64{"tx_global_pause_duration": 2_500_000, "tx_global_pause": 3000})
		for prio := range 8 {
			if _, ok := p.Counter(schemas.SourceEthtool, fmt.Sprintf("tx_prio%d_pause_duration", prio)); ok {
				t.Fatalf("the capture lists per-priority pause durations; this case is about a port that does not")
			}
		}
		f := schemas.PortFigures(p)
		if f.TxPauseFraction != 0.25 || f.RxPauseFraction != 0 {
			t.Errorf("tx pause %v rx pause %v, want 0.25 (2.5 s of 10 s) and 0", f.TxPauseFraction, f.RxPauseFraction)
		}
	})
}
