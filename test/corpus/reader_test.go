package corpus

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestCorpusSysfsTree builds the sysfs tree of every sysfs capture's last
// dump with collector/sysfstest and reads it with the collector's own host
// source: every captured port must come through with every counter at its
// captured value, and nothing else.
func TestCorpusSysfsTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipped: the sysfs reader reads Linux's sysfs only")
	}
	for _, f := range fixtures {
		c := load(t, f)
		if c.ethtool {
			continue
		}
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			d := c.dumps[len(c.dumps)-1]
			root := t.TempDir()
			class := filepath.Join(root, "class")
			// The reader reads only a port whose state file says ACTIVE;
			// readings() takes a port whose state was not captured as read
			// (mlx5-ib-pinned-counters.txt: a cat of counters/ alone), so
			// the tree gives such a port an ACTIVE state file.
			spec := d.spec
			spec.Devices = slices.Clone(spec.Devices)
			for i := range spec.Devices {
				spec.Devices[i].Ports = slices.Clone(spec.Devices[i].Ports)
				for j := range spec.Devices[i].Ports {
					p := &spec.Devices[i].Ports[j]
					if _, ok := p.Files["state"]; !ok {
						p.Files = maps.Clone(p.Files)
						if p.Files == nil {
							p.Files = map[string]string{}
						}
						p.Files["state"] = "4: ACTIVE"
					}
				}
			}
			if err := sysfstest.Build(class, spec); err != nil {
				t.Fatal(err)
			}
			// Device-level hw_counters (mlx4) go where the kernel puts them,
			// beside ports/: sysfstest has no field for them.
			for dev, m := range d.devHW {
				dir := filepath.Join(class, "infiniband", dev, "hw_counters")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, v := range m {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.FormatUint(v, 10)+"\n"), 0o444); err != nil {
						t.Fatal(err)
					}
				}
			}
			h, err := collector.NewHostSource("corpus", collector.WithSysfsRoot(root), collector.WithEthtool(false),
				collector.WithConfigInterval(0), collector.WithHostClock(func() time.Time { return base }))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			r, err := h.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := readings(t, c, d, base)
			if len(r.Ports) != len(want) {
				t.Errorf("read %d ports, want the %d captured", len(r.Ports), len(want))
			}
			for _, w := range want {
				got := findReading(t, r.Ports, w.Device, w.Port)
				if w.State == "" {
					w.State = "ACTIVE" // the state the tree was given above
				}
				if got.State != w.State || got.LinkLayer != w.LinkLayer || got.Rate != w.Rate {
					t.Errorf("%s: state %q link %q rate %q, want %q %q %q", portKey(w.Device, w.Port, ""), got.State, got.LinkLayer, got.Rate, w.State, w.LinkLayer, w.Rate)
				}
				for _, sc := range counterList(w) {
					if v, ok := valueOf(got, sc.src, sc.name); !ok || v != sc.value {
						t.Errorf("%s: %s %s read %d (present %v), want the captured %d", portKey(w.Device, w.Port, ""), sc.src, sc.name, v, ok, sc.value)
					}
				}
				if n, m := len(got.Counters)+len(got.HWCounters), len(w.Counters)+len(w.HWCounters); n != m {
					t.Errorf("%s: read %d counters, want the %d captured", portKey(w.Device, w.Port, ""), n, m)
				}
			}
			// mlx4 keeps its hw_counters per device on these kernels:
			// rq_num_oos and sq_num_oos, the only sequence-error counters
			// mlx4 has, must reach a sample (on the lowest port, as
			// readings() expects and the comparison above checked).
			for dev, m := range d.devHW {
				low := findReading(t, r.Ports, dev, 1)
				for name, v := range m {
					if got, ok := low.HWCounters[name]; !ok || got != v {
						t.Errorf("device-level %s/hw_counters/%s = %d read %d (present %v) on port 1", dev, name, v, got, ok)
					}
				}
			}
		})
	}
}

// Detector inputs, by the counters each detector reads (docs/formats.md,
// "What real NICs expose"). Every name resolves through the dictionary, so
// a counter renamed there breaks this table rather than silently matching
// nothing.
var detectorInputs = map[string][]schemas.CounterID{
	"pfc_storm": ids(schemas.SourceEthtool, "tx_prio%d_pause_duration", "rx_prio%d_pause_duration",
		"tx_global_pause_duration", "rx_global_pause_duration", "tx_pause_duration", "rx_pause_duration"),
	"receive_starvation": ids(schemas.SourceHWCounters, "out_of_buffer", "rnr_nak_retry_err", "rq_num_rnr", "sq_num_rnr"),
	"retransmissions": ids(schemas.SourceHWCounters, "out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
		"implied_nak_seq_err", "duplicate_request", "rq_num_oos", "rq_num_dup", "sq_num_oos", "sq_num_to"),
	"completion_errors": ids(schemas.SourceHWCounters, "req_cqe_error", "resp_cqe_error", "req_remote_access_errors",
		"req_remote_invalid_request", "resp_local_length_error", "resp_remote_access_errors", "rq_num_lle", "sq_num_lle",
		"rq_num_lpe", "sq_num_lpe", "rq_num_rae", "sq_num_rae", "rq_num_rire", "sq_num_rire", "rq_num_wrfe", "sq_num_wrfe",
		"sq_num_tree", "sq_num_rree"),
	"cnp_ecn_imbalance": ids(schemas.SourceHWCounters, "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled",
		"rp_cnp_ignored", "cc_rx_ce_pkts", "cc_rx_cnp_pkts", "cc_tx_cnp_pkts"),
	"link_flap": append(ids(schemas.SourceCounters, "link_downed"), ids(schemas.SourceEthtool, "link_down_events_phy")...),
}

func init() {
	// rx_discards_phy and rx_out_of_buffer are starvation's ethtool side.
	detectorInputs["receive_starvation"] = append(detectorInputs["receive_starvation"], ids(schemas.SourceEthtool, "rx_discards_phy", "rx_out_of_buffer")...)
}

// ids resolves names; a name with %d stands for priorities 0-7.
func ids(src schemas.Source, names ...string) []schemas.CounterID {
	var out []schemas.CounterID
	for _, n := range names {
		if !containsVerb(n) {
			out = append(out, schemas.MustCounterID(src, n))
			continue
		}
		for p := range 8 {
			out = append(out, schemas.MustCounterID(src, sprintfDigit(n, p)))
		}
	}
	return out
}

func containsVerb(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 'd' {
			return true
		}
	}
	return false
}

func sprintfDigit(s string, d int) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 'd' {
			return s[:i] + strconv.Itoa(d) + s[i+2:]
		}
	}
	return s
}

// detectorsFed lists the detectors whose inputs a sample carries. ber_drift
// needs rx_corrected_bits_phy and bits to measure it against (rx_bits_phy
// or the link rate) on Ethernet, symbol_error on InfiniBand;
// counter_saturated needs a counter that can pin (the IB PortCounters and
// the 32-bit-capable data counters).
func detectorsFed(p *schemas.PortSample) map[string]bool {
	fed := map[string]bool{}
	for det, list := range detectorInputs {
		for _, id := range list {
			if _, ok := p.CounterByID(id); ok {
				fed[det] = true
				break
			}
		}
	}
	if p.LinkLayer == "InfiniBand" {
		if _, ok := p.Counter(schemas.SourceCounters, "symbol_error"); ok {
			fed["ber_drift"] = true
		}
	} else if _, ok := p.Counter(schemas.SourceEthtool, "rx_corrected_bits_phy"); ok {
		if _, src := schemas.EthernetPHYBits(p); src != schemas.PHYBitsNone {
			fed["ber_drift"] = true
		}
	}
	for _, c := range p.Counters {
		if k := schemas.KindOf(c.Source, c.Name); k.Saturating() || k == schemas.Ext64Sat32 {
			fed["counter_saturated"] = true
		}
	}
	return fed
}

// TestCorpusDetectorInputs records, per capture, which detectors a
// collector reading exactly that would feed (over all its ports): what
// each real NIC gives rdmawatch to work with.
func TestCorpusDetectorInputs(t *testing.T) {
	for _, f := range fixtures {
		t.Run(filepath.Base(f.file), func(t *testing.T) {
			c := load(t, f)
			e := collector.NewEngine(nil)
			var b *schemas.CounterBatch
			for i := range 2 {
				at := base.Add(time.Duration(i) * 10 * time.Second)
				b = e.Apply(&collector.Reading{Node: "corpus", Time: at, Ports: readings(t, c, c.dumps[len(c.dumps)-1], at)})
			}
			got := map[string]bool{}
			for i := range b.Ports {
				for det := range detectorsFed(&b.Ports[i]) {
					got[det] = true
				}
			}
			want := map[string]bool{}
			for _, d := range f.detectors {
				want[d] = true
			}
			for _, d := range sortedKeys(got) {
				if !want[d] {
					t.Errorf("feeds %s, which the fixtures table does not say", d)
				}
			}
			for _, d := range f.detectors {
				if !got[d] {
					t.Errorf("does not feed %s, which the fixtures table says it does", d)
				}
			}
		})
	}
}
