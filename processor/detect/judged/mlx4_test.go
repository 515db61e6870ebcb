package judged_test

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/completionerrors"
	"github.com/rdmawatch/rdmawatch/processor/detect/judged"
	"github.com/rdmawatch/rdmawatch/processor/detect/receivestarvation"
	"github.com/rdmawatch/rdmawatch/processor/detect/retransmissions"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestMlx4Counters: each mlx4 name drives its detector the way the mlx5
// q-counter it maps to does (counterids_mlx4.go), and the evidence keeps the
// name the driver uses. Every case runs once with mlx5's names and once with
// mlx4's; both must give the same incidents.
func TestMlx4Counters(t *testing.T) {
	recv4 := schemas.PortID{Node: "host-a", Device: "mlx4_0", Port: 1}
	send4 := schemas.PortID{Node: "host-b", Device: "mlx4_0", Port: 1}
	type run struct {
		recv, send schemas.PortID
		// counters per 5 s on the receiver and the sender during the fault
		recvKV, sendKV []any
		// names the evidence must show, and must not
		want, notWant []string
		phrase        string
	}
	cases := []struct {
		name   string
		det    func() processor.Detector
		states []string
		// the subject is the receiver (or the sender when sendSubject)
		sendSubject bool
		mlx5, mlx4  run
	}{
		{
			name: "retransmissions: a lossy link opens on the receiver, the senders are its peers",
			det:  func() processor.Detector { return retransmissions.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB,
				recvKV: []any{"out_of_sequence", 20_000}, sendKV: []any{"packet_seq_err", 400, "local_ack_timeout_err", 20},
				want: []string{"out_of_sequence"}, notWant: []string{"rq_num_oos"}},
			mlx4: run{recv: recv4, send: send4,
				recvKV: []any{"rq_num_oos", 20_000}, sendKV: []any{"sq_num_oos", 400, "sq_num_to", 20},
				want: []string{"rq_num_oos"}, notWant: []string{"out_of_sequence"}},
		},
		{
			name: "retransmissions: duplicates count with the out-of-sequence packets",
			det:  func() processor.Detector { return retransmissions.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"out_of_sequence", 10_000, "duplicate_request", 10_000}, want: []string{"duplicate_request"}},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"rq_num_oos", 10_000, "rq_num_dup", 10_000}, want: []string{"rq_num_dup"}},
		},
		{
			name: "retransmissions: corrupt frames on the port are physical evidence",
			det:  func() processor.Detector { return retransmissions.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"out_of_sequence", 20_000, "rx_crc_errors_phy", 300},
				want: []string{"rx_crc_errors_phy"}, phrase: "its MAC drops corrupt frames (rx_crc_errors_phy 60/s)"},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"rq_num_oos", 20_000, "rx_crc_errors", 300, "rx_errors", 300},
				want: []string{"rx_crc_errors", "rx_errors"}, phrase: "its MAC drops corrupt frames (rx_crc_errors 60/s)"},
		},
		{
			name: "retransmissions: senders alone become the subject when no receiver reports",
			det:  func() processor.Detector { return retransmissions.New() }, states: []string{"open", "resolved"}, sendSubject: true,
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, sendKV: []any{"packet_seq_err", 500}, phrase: "packet_seq_err 100/s"},
			mlx4: run{recv: recv4, send: send4, sendKV: []any{"sq_num_oos", 500}, phrase: "sq_num_oos 100/s"},
		},
		{
			name: "receive_starvation: a receiver that posts no buffers refuses packets",
			det:  func() processor.Detector { return receivestarvation.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"out_of_buffer", 5000}, sendKV: []any{"rnr_nak_retry_err", 100},
				want: []string{"out_of_buffer"}, notWant: []string{"rq_num_rnr"}, phrase: "out_of_buffer 1k/s"},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"rq_num_rnr", 5000}, sendKV: []any{"sq_num_rnr", 100},
				want: []string{"rq_num_rnr"}, notWant: []string{"out_of_buffer"}, phrase: "rq_num_rnr 1k/s"},
		},
		{
			name: "receive_starvation: senders whose RNR retries run out name an unmonitored receiver",
			det:  func() processor.Detector { return receivestarvation.New() }, states: []string{"open", "resolved"}, sendSubject: true,
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, sendKV: []any{"rnr_nak_retry_err", 500}, phrase: "rnr_nak_retry_err 100/s"},
			mlx4: run{recv: recv4, send: send4, sendKV: []any{"sq_num_rnr", 500}, phrase: "sq_num_rnr 100/s"},
		},
		{
			name: "completion_errors: remote access errors of an application",
			det:  func() processor.Detector { return completionerrors.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"req_remote_access_errors", 250, "req_cqe_error", 250, "req_cqe_flush_error", 3000},
				want: []string{"req_remote_access_errors", "req_cqe_flush_error"}, phrase: "memory registration"},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"sq_num_rae", 250, "sq_num_wrfe", 3250},
				want: []string{"sq_num_rae", "sq_num_wrfe"}, phrase: "mostly sq_num_rae 50/s; error CQEs with flushes 650/s"},
		},
		{
			name: "completion_errors: responder length errors",
			det:  func() processor.Detector { return completionerrors.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"resp_local_length_error", 100, "resp_cqe_error", 100}, want: []string{"resp_local_length_error"}},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"rq_num_lle", 100, "rq_num_wrfe", 100}, want: []string{"rq_num_lle"}},
		},
		{
			name: "completion_errors: flushes alone (an application's teardown) are no incident",
			det:  func() processor.Detector { return completionerrors.New() },
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"req_cqe_flush_error", 500, "resp_cqe_flush_error", 100}},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"sq_num_wrfe", 500, "rq_num_wrfe", 100}},
		},
		{
			name: "completion_errors: RNR retries run out",
			det:  func() processor.Detector { return completionerrors.New() }, states: []string{"open", "resolved"},
			mlx5: run{recv: detecttest.PortA, send: detecttest.PortB, recvKV: []any{"req_cqe_error", 100, "rnr_nak_retry_err", 400},
				want: []string{"rnr_nak_retry_err"}, phrase: "receive-not-ready retries run out"},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"sq_num_rree", 100, "sq_num_rnr", 400},
				want: []string{"sq_num_rree", "sq_num_rnr"}, phrase: "receive-not-ready retries run out"},
		},
		{
			name: "completion_errors: transport retries run out",
			det:  func() processor.Detector { return completionerrors.New() }, states: []string{"open", "resolved"},
			mlx4: run{recv: recv4, send: send4, recvKV: []any{"sq_num_tree", 100, "sq_num_to", 700},
				want: []string{"sq_num_tree"}, phrase: "transport retries run out"},
		},
	}
	for _, c := range cases {
		for _, drv := range []struct {
			name string
			r    run
		}{{"mlx5", c.mlx5}, {"mlx4", c.mlx4}} {
			r := drv.r
			if r.recv == (schemas.PortID{}) {
				continue
			}
			t.Run(c.name+"/"+drv.name, func(t *testing.T) {
				h := detecttest.NewHarness(t, c.det())
				for sec := 0.0; sec < 1500; sec += 5 {
					var rkv, skv []any
					if sec >= 600 && sec < 900 {
						rkv, skv = r.recvKV, r.sendKV
					}
					h.Feed(detecttest.Sample(r.recv, sec, "ACTIVE", detecttest.Traffic(1_000_000, rkv...)...))
					h.Feed(detecttest.Sample(r.send, sec+1, "ACTIVE", detecttest.Traffic(1_000_000, skv...)...))
				}
				if !detecttest.EqualStrings(h.States(), c.states) {
					for _, ev := range h.Events {
						t.Logf("%s %s %s", ev.State, ev.Subject, ev.Summary)
					}
					t.Fatalf("states %v, want %v", h.States(), c.states)
				}
				if len(h.Events) == 0 {
					return
				}
				o := h.Events[0]
				want := r.recv
				if c.sendSubject {
					want = r.send
				}
				if o.Subject != want.Subject() {
					t.Errorf("subject %s, want %s", o.Subject, want)
				}
				rates, _ := o.Evidence["rates_per_s"].(map[string]any)
				for _, n := range r.want {
					if _, ok := rates[n]; !ok {
						t.Errorf("evidence rates %v lack %s", rates, n)
					}
				}
				for _, n := range r.notWant {
					if _, ok := rates[n]; ok {
						t.Errorf("evidence rates %v name %s", rates, n)
					}
				}
				if r.phrase != "" && !strings.Contains(o.Summary, r.phrase) {
					t.Errorf("summary %q lacks %q", o.Summary, r.phrase)
				}
				if c.name[:len("retransmissions")] == "retransmissions" && !c.sendSubject && len(r.sendKV) > 0 {
					if peers, _ := o.Evidence["peers"].([]string); len(peers) != 1 || peers[0] != r.send.Subject().String() {
						t.Errorf("peers %v, want %s", o.Evidence["peers"], r.send)
					}
				}
			})
		}
	}
}

// TestJudgedCounterBound: the judged detectors' per-port state keeps fixed
// arrays of judgedMax counters; a detector listing more would index out of
// them on its first sample.
func TestJudgedCounterBound(t *testing.T) {
	for _, d := range []*judged.Engine{retransmissions.New().Engine, completionerrors.New().Engine, receivestarvation.New().Engine} {
		if n := d.CounterCount(); n > judged.Max {
			t.Errorf("%s reads %d counters, judgedMax is %d", d.Type, n, judged.Max)
		}
	}
}

// TestMlx4Checks: the next checks of an mlx4 port name mlx4's counters and
// tools (mlxlink does not know ConnectX-3; its diagnostic counters are per
// device).
func TestMlx4Checks(t *testing.T) {
	id := schemas.PortID{Node: "host-a", Device: "mlx4_0", Port: 1}
	h := detecttest.NewHarness(t, retransmissions.New(), completionerrors.New())
	for sec := 0.0; sec < 700; sec += 5 {
		var kv []any
		if sec >= 600 {
			kv = []any{"rq_num_oos", 20_000, "sq_num_rae", 250}
		}
		h.Feed(detecttest.Sample(id, sec, "ACTIVE", detecttest.Traffic(1_000_000, kv...)...))
	}
	if len(h.Events) != 2 {
		t.Fatalf("%d events, want an open of each", len(h.Events))
	}
	for _, ev := range h.Events {
		var cmds []string
		for _, c := range ev.Checks {
			cmds = append(cmds, c.Command)
		}
		all := strings.Join(cmds, "\n")
		if strings.Contains(all, "mlxlink") || strings.Contains(all, "mlx5") {
			t.Errorf("%s checks name mlx5 tools:\n%s", ev.Type, all)
		}
		if !strings.Contains(all, "/sys/class/infiniband/mlx4_0/hw_counters/") {
			t.Errorf("%s checks do not read the device's counters:\n%s", ev.Type, all)
		}
	}
}
