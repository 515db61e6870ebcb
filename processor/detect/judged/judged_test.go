package judged_test

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/completionerrors"
	"github.com/rdmawatch/rdmawatch/processor/detect/receivestarvation"
	"github.com/rdmawatch/rdmawatch/processor/detect/retransmissions"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestJudgedDetectors(t *testing.T) {
	cases := []struct {
		name  string
		det   func() processor.Detector
		run   func(h *detecttest.Harness)
		want  []string
		check func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name: "retransmissions: healthy reordering that follows traffic is no incident",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 3600, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					pkts := 200_000
					if int(sec/600)%2 == 1 {
						pkts = 4_000_000 // a job starts: 20x the traffic, 20x the reordering
					}
					return detecttest.Traffic(uint64(pkts), "out_of_sequence", pkts/20_000, "packet_seq_err", pkts/200_000)
				})
			},
		},
		{
			name: "retransmissions: a port with high healthy reordering from its start",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1800, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					return detecttest.Traffic(1_000_000, "out_of_sequence", 1000+int(sec)%300)
				})
			},
		},
		{
			name: "retransmissions: a lossy link opens on its port, not on its senders, and resolves",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				loss := func(sec float64) bool { return sec >= 600 && sec < 900 }
				for sec := 0.0; sec < 1500; sec += 5 {
					oos, nak := 20, 0
					if loss(sec) {
						oos, nak = 20_000, 400
					}
					h.Feed(detecttest.Sample(detecttest.PortA, sec, "ACTIVE", detecttest.Traffic(1_000_000, "out_of_sequence", oos)...))
					h.Feed(detecttest.Sample(detecttest.PortB, sec+1, "ACTIVE", detecttest.Traffic(1_000_000, "packet_seq_err", nak, "local_ack_timeout_err", nak/20)...))
				}
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				o := evs[0]
				if o.Subject != detecttest.PortA.Subject() || o.Layer != "transport" || o.Type != "retransmissions" {
					t.Errorf("open %+v", o)
				}
				if o.DetectedAt-detecttest.At(600) > 60_000 || o.Start < detecttest.At(590) || o.Start > detecttest.At(600) {
					t.Errorf("start %v detected %v: want onset ~600 s, detected within 60 s", o.Start, o.DetectedAt)
				}
				if !strings.Contains(o.Summary, "out-of-sequence") || len(o.Checks) < 4 {
					t.Errorf("summary %q checks %d", o.Summary, len(o.Checks))
				}
				if peers, _ := o.Evidence["peers"].([]string); len(peers) != 1 || peers[0] != detecttest.PortB.Subject().String() {
					t.Errorf("peers %v", o.Evidence["peers"])
				}
			},
		},
		{
			name: "retransmissions: resets, restarts and held readings are not loss",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 300, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Traffic(1_000_000, "out_of_sequence", 10) })
				h.Feed(detecttest.Sample(detecttest.PortA, 300, "ACTIVE", detecttest.Ctr("port_rcv_packets", 5, 5, detecttest.Reset), detecttest.HW("out_of_sequence", 9e6, 9e6, detecttest.Reset)))
				h.Feed(detecttest.Sample(detecttest.PortA, 305, "ACTIVE", detecttest.Ctr("port_rcv_packets", 5, 0, detecttest.First), detecttest.HW("out_of_sequence", 9e6, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 310, "ACTIVE", detecttest.Ctr("port_rcv_packets", 5, 1e6, 0), detecttest.HW("out_of_sequence", 0, 0, detecttest.Held)))
				h.Steady(detecttest.PortA, 315, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Traffic(1_000_000, "out_of_sequence", 10) })
			},
		},
		{
			name: "retransmissions: senders alone become the subject when no receiver reports",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortB, 0, 600, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if sec >= 300 {
						return detecttest.Traffic(1_000_000, "packet_seq_err", 500)
					}
					return detecttest.Traffic(1_000_000)
				})
			},
			want: []string{"open"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[0].Subject != detecttest.PortB.Subject() || evs[0].Evidence["secondary_only"] != true {
					t.Errorf("open %+v", evs[0])
				}
			},
		},
		{
			name: "receive_starvation: incast blips are no incident",
			det:  func() processor.Detector { return receivestarvation.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 3600, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if int(sec)%400 < 10 {
						return detecttest.Traffic(1_000_000, "out_of_buffer", 2000, "rx_discards_phy", 300)
					}
					return detecttest.Traffic(1_000_000, "out_of_buffer", int(sec)%3)
				})
			},
		},
		{
			name: "receive_starvation: one starving receiver is one incident whatever its senders count",
			det:  func() processor.Detector { return receivestarvation.New() },
			run: func(h *detecttest.Harness) {
				for sec := 0.0; sec < 1500; sec += 5 {
					oob, rnr := 1, 0
					if sec >= 600 && sec < 900 {
						oob, rnr = 16_000, 200
					}
					h.Feed(detecttest.Sample(detecttest.PortA, sec, "ACTIVE", detecttest.Traffic(1_000_000, "out_of_buffer", oob)...))
					h.Feed(detecttest.Sample(detecttest.PortB, sec+1, "ACTIVE", detecttest.Traffic(1_000_000, "rnr_nak_retry_err", rnr)...))
					h.Feed(detecttest.Sample(detecttest.PortC, sec+2, "ACTIVE", detecttest.Traffic(1_000_000, "rnr_nak_retry_err", rnr)...))
				}
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				o := evs[0]
				if o.Subject != detecttest.PortA.Subject() || o.Layer != "application" || o.Severity != "critical" {
					t.Errorf("open %+v", o)
				}
				if o.DetectedAt-detecttest.At(600) > 60_000 || o.DetectedAt-detecttest.At(600) < 20_000 {
					t.Errorf("detected %v: want 20-60 s after the onset", o.DetectedAt)
				}
				if !strings.Contains(o.Summary, "does not drain its receive queue (out_of_buffer 3.2k/s") {
					t.Errorf("summary %q", o.Summary)
				}
			},
		},
		{
			name: "receive_starvation: drops that begin with the port's own pause storm are the storm's",
			det:  func() processor.Detector { return receivestarvation.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1200, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if sec >= 600 && sec < 900 {
						return append(detecttest.Traffic(1_000, "out_of_buffer", 10_000), detecttest.Eth("tx_prio3_pause_duration", 4_500_000, 4_500_000, 0))
					}
					return detecttest.Traffic(1_000_000)
				})
			},
		},
		{
			name: "receive_starvation: a starvation before the storm stays open through it",
			det:  func() processor.Detector { return receivestarvation.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1200, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					switch {
					case sec >= 600 && sec < 700:
						return detecttest.Traffic(1_000_000, "out_of_buffer", 10_000)
					case sec >= 700 && sec < 900:
						return append(detecttest.Traffic(1_000, "out_of_buffer", 10_000), detecttest.Eth("tx_prio3_pause_duration", 4_500_000, 4_500_000, 0))
					}
					return detecttest.Traffic(1_000_000)
				})
			},
			want: []string{"open", "resolved"},
		},
		{
			name: "retransmissions: more out-of-sequence than received packets is not judged",
			det:  func() processor.Detector { return retransmissions.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1200, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if sec >= 600 {
						return detecttest.Traffic(50, "out_of_sequence", 250)
					}
					return detecttest.Traffic(1_000_000, "out_of_sequence", 1)
				})
			},
		},
		{
			name: "completion_errors: flushes alone are no incident",
			det:  func() processor.Detector { return completionerrors.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1200, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					return detecttest.Traffic(1_000_000, "req_cqe_flush_error", 500, "resp_cqe_flush_error", 100)
				})
			},
		},
		{
			name: "completion_errors: a single error is no incident, an application's errors are",
			det:  func() processor.Detector { return completionerrors.New() },
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 1800, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					switch {
					case sec == 300:
						return detecttest.Traffic(1_000_000, "req_cqe_error", 1, "req_cqe_flush_error", 40)
					case sec >= 900 && sec < 1200:
						return detecttest.Traffic(1_000_000, "req_remote_access_errors", 250, "req_cqe_error", 250, "req_cqe_flush_error", 3000)
					}
					return detecttest.Traffic(1_000_000)
				})
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if !strings.Contains(evs[0].Summary, "req_remote_access_errors 50/s") && !strings.Contains(evs[0].Summary, "req_cqe_error 50/s") {
					t.Errorf("summary %q", evs[0].Summary)
				}
				if evs[0].DetectedAt != detecttest.At(905) {
					t.Errorf("detected %v, want the second errored sample", evs[0].DetectedAt)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, c.det())
			c.run(h)
			if c.want != nil || c.check == nil {
				if !detecttest.EqualStrings(h.States(), c.want) {
					for _, ev := range h.Events {
						t.Logf("%s %s %s %s", ev.State, ev.Subject, ev.DetectedAt, ev.Summary)
					}
					t.Fatalf("states %v, want %v", h.States(), c.want)
				}
			}
			if c.check != nil {
				c.check(t, h.Events)
			}
		})
	}
}

// TestJudgedSettings: settings from the configuration file reach the
// incident policy and thresholds of a judged detector.
func TestJudgedSettings(t *testing.T) {
	dets, err := processor.NewDetectors(schemas.TypeReceiveStarvation)
	if err != nil {
		t.Fatal(err)
	}
	if err := (processor.Settings{schemas.TypeReceiveStarvation: {"open_after": "2m", "min_rate": "500", "open_after_samples": "4"}}).Apply(dets); err != nil {
		t.Fatal(err)
	}
	d := processor.Unwrap(dets[0]).(*receivestarvation.Detector)
	p := d.Track().Policy()
	if p.OpenAfter != 2*60e9 || p.OpenAfterSamples != 4 || d.Engine.MinRate != 500 {
		t.Errorf("policy %+v min rate %v", p, d.Engine.MinRate)
	}
}
