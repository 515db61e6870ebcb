package report

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

var pngDir = flag.String("png-dir", "", "also write the type plots' SVGs there (render with rsvg-convert and look)")

// typeT0 is 2026-01-01T00:00:00Z; every incident of TestTypePlots runs
// from +12 min to +18 min, samples every 10 s from 0 to +30 min.
const typeT0 = int64(1767225600000)

// counter is one counter of a test port: its source, and its delta per
// interval before the incident and during it. listed: the collector
// lists it (in the baseline) even while it never moves.
type counter struct {
	src            schemas.Source
	name           string
	before, during uint64
}

// typePort writes 30 minutes of 10 s samples of one port: a baseline
// listing every counter, then the deltas.
func typePort(t *testing.T, ctx context.Context, conn chdb.Conn, node, device, linkLayer string, counters []counter) {
	t.Helper()
	b := &schemas.CounterBatch{Node: node, BootID: "b", TimeMs: typeT0}
	value := map[string]uint64{}
	for k := int64(0); k <= 180; k++ {
		ts := typeT0 + k*10_000
		during := ts > typeT0+12*60_000 && ts <= typeT0+18*60_000
		ps := schemas.PortSample{Device: device, Port: 1, Netdev: "eth2", LinkLayer: linkLayer, State: "ACTIVE",
			Rate: "100 Gb/sec (4X EDR)", TimeMs: ts, IntervalMs: 10_000}
		if k == 0 {
			ps.IntervalMs = 0
		}
		all := append([]counter{{schemas.SourceCounters, "port_rcv_data", 1e9, 1e9}, {schemas.SourceCounters, "port_xmit_data", 5e8, 5e8},
			{schemas.SourceCounters, "port_rcv_packets", 1e6, 1e6}}, counters...)
		for _, c := range all {
			cd := schemas.CounterDelta{Source: c.src, Name: c.name}
			switch {
			case k == 0:
				cd.Flags = schemas.FlagFirst
			case during:
				cd.Delta = c.during
			default:
				cd.Delta = c.before
			}
			value[c.name] += cd.Delta
			cd.Value = value[c.name]
			ps.Counters = append(ps.Counters, cd)
		}
		b.Ports = append(b.Ports, ps)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO port_samples ("+strings.Join(sink.SampleColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sink.SampleRows(b) {
		if err := batch.Append(r.Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

func hw(name string, before, during uint64) counter {
	return counter{schemas.SourceHWCounters, name, before, during}
}

func eth(name string, before, during uint64) counter {
	return counter{schemas.SourceEthtool, name, before, during}
}

// typeConfig writes a port_config row of node's mlx5_0/1 at +atS seconds.
func typeConfig(t *testing.T, ctx context.Context, conn chdb.Conn, node string, atS int64, c schemas.PortConfig) {
	t.Helper()
	inv := &schemas.Inventory{Node: node, BootID: "b", TimeMs: typeT0 + atS*1000,
		Ports: []schemas.PortInventory{{Device: "mlx5_0", Port: 1, Netdev: "eth2", Config: &c}}}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO port_config ("+strings.Join(sink.ConfigColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sink.ConfigRows(inv) {
		if err := batch.Append(r.Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

func typeEvent(t *testing.T, ctx context.Context, conn chdb.Conn, typ, node, device string, evidence map[string]any, affected ...string) *Incident {
	t.Helper()
	subj := schemas.Subject{Node: node, Device: device, Port: 1}
	end := schemas.Millis(typeT0 + 18*60_000)
	e := &schemas.Event{Version: schemas.Version, ID: typ + "/" + subj.String(), Type: typ, State: schemas.StateResolved,
		Severity: schemas.SeverityWarning, Scope: schemas.ScopePort, Subject: subj, Start: schemas.Millis(typeT0 + 12*60_000),
		DetectedAt: end, End: &end, Layer: schemas.LayerApplication, Summary: typ, Revision: 2, Evidence: evidence}
	for _, a := range portsOf(affected) {
		e.Affected = append(e.Affected, schemas.Affected{Node: a.node, Device: a.device, Port: int(a.port), FirstSeen: e.Start})
	}
	opened := *e
	opened.State, opened.End, opened.Revision, opened.DetectedAt = schemas.StateOpen, nil, 1, schemas.Millis(typeT0+12*60_000+30_000)
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO events ("+strings.Join(sink.EventColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*schemas.Event{&opened, e} {
		r, err := sink.NewEventRow(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.Append(r.Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	ej, _ := json.Marshal(evidence)
	inc := &Incident{ID: e.ID, Type: typ, Node: node, Device: device, Port: 1, StartMs: int64(e.Start), EndMs: (*int64)(&end),
		LastMs: int64(end), Evidence: string(ej)}
	if err := changes(ctx, conn, inc); err != nil {
		t.Fatal(err)
	}
	return inc
}

func intp(v int) *int       { return &v }
func prios(v ...int) *[]int { return &v }

// TestTypePlots: the postmortem plot of each of receive_starvation,
// retransmissions, completion_errors and config_mismatch draws the
// counters its detector judged, from port_samples and port_config as the
// sink writes them: the panels' titles, a legend entry for every series
// the port has (one listed in the baseline and never moving included), none
// for a counter absent from every sample or a peer's counter that never
// moved, the state changes and, for config_mismatch, the change marked.
func TestTypePlots(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		setup      func(t *testing.T) *Incident
		titles     []string // panel titles, in order
		legend     []string // legend entries that must be there
		absent     []string // legend entries that must not
		text       []string // other text of the SVG (marks)
	}{{
		name: "receive_starvation mlx5 RoCE, a sender's RNR retries", file: "receive_starvation",
		setup: func(t *testing.T) *Incident {
			typePort(t, ctx, conn, "gpu-017", "mlx5_0", "Ethernet", []counter{hw("out_of_buffer", 0, 5000), eth("rx_discards_phy", 0, 2000), eth("rx_out_of_buffer", 0, 0),
				hw("rnr_nak_retry_err", 0, 0)})
			typePort(t, ctx, conn, "gpu-021", "mlx5_0", "Ethernet", []counter{hw("rnr_nak_retry_err", 0, 300), hw("out_of_buffer", 0, 0)})
			return typeEvent(t, ctx, conn, "receive_starvation", "gpu-017", "mlx5_0", map[string]any{"peers": []string{"gpu-021/mlx5_0/1"}})
		},
		titles: []string{"Packets dropped on receive: no posted buffer, NIC buffer full", "RNR retries of the senders (peers in the evidence)", "Throughput"},
		// rx_out_of_buffer is listed, never moves: the port has it.
		legend: []string{"out_of_buffer", "rx_discards_phy", "rx_out_of_buffer", "gpu-021: rnr_nak_retry_err", "received", "sent"},
		absent: []string{"rq_num_rnr", "this port: rnr_nak_retry_err", "gpu-021: out_of_buffer"},
		text:   []string{"1  00:12:30  open (revision 1)", "2  00:18:00  resolved (revision 2)"},
	}, {
		name: "receive_starvation InfiniBand: no NIC buffer counter, no senders known",
		setup: func(t *testing.T) *Incident {
			typePort(t, ctx, conn, "gpu-018", "mlx5_1", "InfiniBand", []counter{hw("out_of_buffer", 1, 900)})
			return typeEvent(t, ctx, conn, "receive_starvation", "gpu-018", "mlx5_1", map[string]any{})
		},
		titles: []string{"Packets dropped on receive: no posted buffer, NIC buffer full", "Throughput"},
		legend: []string{"out_of_buffer"},
		absent: []string{"rx_discards_phy", "rx_out_of_buffer"},
	}, {
		name: "retransmissions mlx5, peers in the evidence", file: "retransmissions",
		setup: func(t *testing.T) *Incident {
			typePort(t, ctx, conn, "gpu-030", "mlx5_0", "Ethernet", []counter{hw("out_of_sequence", 2, 2000), hw("duplicate_request", 0, 0)})
			typePort(t, ctx, conn, "gpu-031", "mlx5_0", "Ethernet", []counter{hw("packet_seq_err", 0, 50), hw("local_ack_timeout_err", 0, 3)})
			return typeEvent(t, ctx, conn, "retransmissions", "gpu-030", "mlx5_0", map[string]any{"peers": []string{"gpu-031/mlx5_0/1"}, "baseline": 2e-6})
		},
		titles: []string{"Out of sequence per received packet", "NAK sequence errors and ACK timeouts of the senders", "Throughput"},
		legend: []string{"out_of_sequence", "duplicate_request (none counted)", "usual share 2e-06", "critical 1e-2", "gpu-031: packet_seq_err", "gpu-031: local_ack_timeout_err"},
		absent: []string{"rq_num_oos", "rq_num_dup", "gpu-031: implied_nak_seq_err", "this port: packet_seq_err"},
	}, {
		name: "retransmissions mlx4, no peers: the fabric's ports whose NAKs moved",
		setup: func(t *testing.T) *Incident {
			typePort(t, ctx, conn, "gpu-040", "mlx4_0", "Ethernet", []counter{hw("rq_num_oos", 0, 30)})
			typePort(t, ctx, conn, "gpu-041", "mlx4_0", "Ethernet", []counter{hw("sq_num_oos", 0, 40), hw("sq_num_to", 0, 0)})
			batch, err := conn.PrepareBatch(ctx, "INSERT INTO topology_ports (fabric, node, device, port, switch, switch_port, tier, loaded_at)")
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range []string{"gpu-040", "gpu-041"} {
				if err := batch.Append("pod-b", n, "mlx4_0", uint16(1), "leaf-09", "swp"+string(rune('1'+i)), "leaf", time.Unix(typeT0/1000, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := batch.Send(); err != nil {
				t.Fatal(err)
			}
			return typeEvent(t, ctx, conn, "retransmissions", "gpu-040", "mlx4_0", map[string]any{})
		},
		titles: []string{"Out of sequence per received packet",
			"NAK sequence errors and ACK timeouts of the fabric's ports (no peers in the evidence)", "Throughput"},
		legend: []string{"rq_num_oos", "gpu-041: sq_num_oos"},
		// gpu-031 counts NAKs at the same time, in another fabric.
		absent: []string{"out_of_sequence", "gpu-041: sq_num_to", "gpu-031: packet_seq_err", "critical 1e-2"},
	}, {
		name: "completion_errors: the requester against its responders", file: "completion_errors",
		setup: func(t *testing.T) *Incident {
			typePort(t, ctx, conn, "gpu-050", "mlx5_0", "Ethernet", []counter{hw("req_cqe_error", 0, 250), hw("req_remote_access_errors", 0, 200),
				hw("req_cqe_flush_error", 0, 50)})
			typePort(t, ctx, conn, "gpu-051", "mlx5_0", "Ethernet", []counter{hw("resp_remote_access_errors", 0, 200), hw("resp_local_length_error", 0, 0)})
			typePort(t, ctx, conn, "gpu-052", "mlx5_0", "Ethernet", []counter{hw("resp_local_length_error", 0, 40)})
			return typeEvent(t, ctx, conn, "completion_errors", "gpu-050", "mlx5_0", map[string]any{"role": "requester"},
				"gpu-051/mlx5_0/1", "gpu-052/mlx5_0/1")
		},
		titles: []string{"Failed completions of gpu-050/mlx5_0/1 (requester), by kind", "Failed completions of the affected ports (responders), by kind", "Throughput"},
		legend: []string{"req_cqe_error", "req_remote_access_errors", "req_cqe_flush_error", "gpu-051: resp_remote_access_err", "gpu-052: resp_local_length_error"},
		absent: []string{"resp_cqe_error", "sq_num_wrfe", "gpu-051: resp_local_length_error", "gpu-051: resp_cqe_error"},
	}, {
		name: "config_mismatch: MTU and PFC changed, against the fabric and the link's other end", file: "config_mismatch",
		setup: func(t *testing.T) *Incident {
			for _, at := range []int64{-3600, 300} {
				typeConfig(t, ctx, conn, "gpu-060", at, schemas.PortConfig{MTU: intp(9000), PFCEnabled: prios(3), Trust: "dscp"})
			}
			for _, at := range []int64{720, 1020} {
				typeConfig(t, ctx, conn, "gpu-060", at, schemas.PortConfig{MTU: intp(4200), PFCEnabled: prios(), Trust: "dscp"})
			}
			typeConfig(t, ctx, conn, "gpu-061", -3600, schemas.PortConfig{MTU: intp(9000), PFCEnabled: prios(3)})
			return typeEvent(t, ctx, conn, "config_mismatch", "gpu-060", "mlx5_0", map[string]any{
				"settings": []string{"mtu", "pfc_enabled"}, "mtu": 4200, "fabric_mtu": 9000, "fabric_mtu_share": 0.9,
				"peer": "gpu-061/mlx5_0/1", "peer_mtu": 9000, "priority": 3, "pfc_enabled": []int{}, "fabric_pfc_enabled_share": 1,
			})
		},
		titles: []string{"MTU", "PFC on priority 3 (1 on, 0 off)"},
		legend: []string{"this port", "fabric's MTU (90% of ports)", "link's other end gpu-061", "fabric: on (100% of ports)"},
		absent: []string{"received"},
		text:   []string{"config change: mtu 9000 -> 4200", "config change: pfc_enabled on -> off"},
	}, {
		name: "config_mismatch: forced traffic class, no peer",
		setup: func(t *testing.T) *Incident {
			typeConfig(t, ctx, conn, "gpu-062", -600, schemas.PortConfig{TrafficClass: intp(106)})
			typeConfig(t, ctx, conn, "gpu-062", 720, schemas.PortConfig{TrafficClass: intp(0)})
			return typeEvent(t, ctx, conn, "config_mismatch", "gpu-062", "mlx5_0", map[string]any{
				"settings": []string{"traffic_class"}, "traffic_class": 0, "fabric_traffic_class": 106, "fabric_traffic_class_share": 0.95})
		},
		titles: []string{"Forced traffic class"},
		legend: []string{"this port", "fabric's traffic class (95% of ports)"},
		absent: []string{"link's other end gpu-061", "link's other end (evidence)"},
		text:   []string{"config change: traffic_class 106 -> 0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			inc := tc.setup(t)
			p, err := portPlot(ctx, conn, inc)
			if err != nil {
				t.Fatal(err)
			}
			var titles []string
			names := map[string]bool{}
			for _, panel := range p.Panels {
				titles = append(titles, panel.Title)
				for _, s := range panel.Series {
					names[s.Name] = true
					if !hasFinite(s.Values) {
						t.Errorf("panel %q: series %q has no data, yet a legend entry", panel.Title, s.Name)
					}
					if len(s.Values) != len(p.Times) {
						t.Errorf("panel %q: series %q has %d values for %d times", panel.Title, s.Name, len(s.Values), len(p.Times))
					}
				}
				for _, l := range panel.Levels {
					names[l.Name] = true
				}
			}
			if strings.Join(titles, " | ") != strings.Join(tc.titles, " | ") {
				t.Errorf("panels\n%q\nwant\n%q", titles, tc.titles)
			}
			var buf bytes.Buffer
			if err := p.WriteSVG(&buf); err != nil {
				t.Fatal(err)
			}
			svg := buf.String()
			for _, l := range tc.legend {
				if !names[l] || !strings.Contains(svg, ">"+html.EscapeString(l)+"</text>") {
					t.Errorf("no legend entry %q (series %v)", l, names)
				}
			}
			for _, l := range tc.absent {
				if names[l] || strings.Contains(svg, ">"+html.EscapeString(l)+"</text>") {
					t.Errorf("legend entry %q for a series the port does not have", l)
				}
			}
			for _, s := range append([]string{"open (revision 1)", "resolved (revision 2)"}, tc.text...) {
				if !strings.Contains(svg, html.EscapeString(s)) {
					t.Errorf("the plot lacks %q", s)
				}
			}
			if tc.file == "" {
				return
			}
			// The golden pins the layout: a change shows as a diff to
			// review (render it with rsvg-convert and look), then
			// go test ./report -run TypePlots -update.
			golden := filepath.Join("testdata", tc.file+".golden.svg")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want, err := os.ReadFile(golden); err != nil {
				t.Errorf("%v (go test ./report -run TypePlots -update)", err)
			} else if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("plot differs from %s: render both with rsvg-convert, look, then go test ./report -run TypePlots -update", golden)
			}
			if *pngDir != "" {
				if err := os.WriteFile(filepath.Join(*pngDir, tc.file+".svg"), buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
