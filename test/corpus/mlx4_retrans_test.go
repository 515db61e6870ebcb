package corpus

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/processor/detect/retransmissions"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// zeroFilled returns a dump's readings with every counter some dump of the
// capture lists set to 0 where this dump does not list it. The cx2-mlx4
// captures print only non-zero counters (their README row: "Partial: only
// non-zero counters"), so an absent counter read 0: rq_num_oos and
// sq_num_oos are absent before the corrupt packet and 1 after it.
func zeroFilled(t *testing.T, c *capture, d dump, at time.Time) []collector.PortReading {
	t.Helper()
	union := map[string]map[string]bool{} // "dev/port/src" -> names
	key := func(dev string, port int, src string) string { return portKey(dev, port, "") + "/" + src }
	for _, other := range c.dumps {
		for _, pr := range readings(t, c, other, at) {
			for _, sc := range counterList(pr) {
				k := key(pr.Device, pr.Port, sc.src.String())
				if union[k] == nil {
					union[k] = map[string]bool{}
				}
				union[k][sc.name] = true
			}
		}
	}
	prs := readings(t, c, d, at)
	for i := range prs {
		pr := &prs[i]
		for _, set := range []struct {
			src schemas.Source
			m   *map[string]uint64
		}{{schemas.SourceCounters, &pr.Counters}, {schemas.SourceHWCounters, &pr.HWCounters}} {
			names := union[key(pr.Device, pr.Port, set.src.String())]
			if len(names) == 0 {
				continue
			}
			m := map[string]uint64{}
			maps.Copy(m, *set.m)
			for n := range names {
				if _, ok := m[n]; !ok {
					m[n] = 0
				}
			}
			*set.m = m
		}
	}
	return prs
}

// TestCorpusMlx4Retransmissions feeds the three real dumps, 10 s apart, of
// each ConnectX-2 (mlx4) capture through the delta engine into
// retransmissions.Detector. Between the first two dumps the notes'
// injected corrupt packet moved the device-level rq_num_oos and sq_num_oos
// (mlx4's out_of_sequence and packet_seq_err) from 0 to 1, over about 4.1
// million (InfiniBand) or 9 million (RoCE) received packets on port 1.
//
// What the real deltas warrant: nothing. One out-of-sequence packet is
// no loss rate, and the detector judges a port only after 5 minutes of
// its own quiet history (lossWarm), which 20 s of dumps are not. Read as
// captured, rq_num_oos and sq_num_oos first appear in the second dump, so
// the engine gives them as baselines (FlagFirst), and the detector does
// not judge a sample with a baseline in it; read with the absent counters
// as the zeros they were (zeroFilled), the engine gives their delta 1.
// Either way: no event, and the mlx4 names reach the port-1 sample the
// detector reads (device-level hw_counters go with the lowest port), not
// port 2's.
func TestCorpusMlx4Retransmissions(t *testing.T) {
	files := []string{"cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt", "cx2-mlx4-roce-ubuntu18.04-4.15-counters.txt"}
	type variant struct {
		name      string
		read      func(t *testing.T, c *capture, d dump, at time.Time) []collector.PortReading
		wantDelta uint64
		wantFlags schemas.Flag
	}
	variants := []variant{
		{"as captured", readings, 0, schemas.FlagFirst},
		{"absent counters read as 0", zeroFilled, 1, 0},
	}
	for _, file := range files {
		for _, v := range variants {
			t.Run(file+"/"+v.name, func(t *testing.T) {
				c := load(t, fixtureByFile(t, file))
				r := newRig(t, retransmissions.New())
				defer func() {
					if t.Failed() {
						r.logEvents()
					}
				}()
				for i, d := range c.dumps {
					b := r.read(v.read(t, c, d, base.Add(d.at))...)
					if i != 1 {
						continue
					}
					p1 := sampleOf(t, b, "mlx4_0", 1, "")
					for _, name := range []string{"rq_num_oos", "sq_num_oos"} {
						cd, ok := p1.Counter(schemas.SourceHWCounters, name)
						if !ok || cd.Value != 1 || cd.Delta != v.wantDelta || cd.Flags != v.wantFlags {
							t.Errorf("dump 1 port 1 %s: %+v (present %v), want value 1 delta %d flags %05b", name, cd, ok, v.wantDelta, v.wantFlags)
						}
						if _, ok := sampleOf(t, b, "mlx4_0", 2, "").Counter(schemas.SourceHWCounters, name); ok {
							t.Errorf("port 2's sample carries the device-level %s", name)
						}
					}
				}
				if len(r.events) != 0 {
					t.Errorf("%d events on the real dumps, want none", len(r.events))
				}
			})
		}
	}
}

// TestCorpusMlx4RetransmissionsLoss is the other side of the test above:
// that rq_num_oos, mlx4's name for out_of_sequence, reaches the detector's
// judgement and its evidence when it moves. The real dumps of
// cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt (absent counters as 0) start
// it; after them the readings are synthetic: every 10 s, every counter of
// both ports grows by its real delta between the last two dumps (port 1
// receives 4,099,204 packets per 10 s), rq_num_oos and sq_num_oos stay at
// their real 1 for 15 minutes, then rq_num_oos alone grows by 400 per
// 10 s (1e-4 of the received packets) for 3 minutes.
func TestCorpusMlx4RetransmissionsLoss(t *testing.T) {
	c := load(t, fixtureByFile(t, "cx2-mlx4-ib-ubuntu18.04-4.15-counters.txt"))
	r := newRig(t, retransmissions.New())
	defer func() {
		if t.Failed() {
			r.logEvents()
		}
	}()
	last := len(c.dumps) - 1
	var prev, cur []collector.PortReading
	for i, d := range c.dumps {
		prs := zeroFilled(t, c, d, base.Add(d.at))
		r.read(prs...)
		if i == last-1 {
			prev = prs
		}
		cur = prs
	}
	step := map[string]map[string]uint64{} // port -> counter -> real delta
	for i := range cur {
		p := findReading(t, prev, cur[i].Device, cur[i].Port)
		s := map[string]uint64{}
		for name, v := range cur[i].Counters {
			s[name] = v - p.Counters[name]
		}
		step[portKey(cur[i].Device, cur[i].Port, "")] = s
	}
	if got := step["mlx4_0/1"]["port_rcv_packets"]; got != 4_099_204 {
		t.Fatalf("port 1 receives %d packets per dump, want the real 4099204", got)
	}
	const quiet, loss = 90, 18 // readings of 10 s
	at := base.Add(c.dumps[last].at)
	var opened *schemas.Event
	for k := 1; k <= quiet+loss; k++ {
		at = at.Add(10 * time.Second)
		next := make([]collector.PortReading, len(cur))
		for i, pr := range cur {
			n := pr
			n.Time = at
			n.Counters = cloneMap(pr.Counters)
			for name, d := range step[portKey(pr.Device, pr.Port, "")] {
				n.Counters[name] += d
			}
			if pr.HWCounters != nil {
				n.HWCounters = cloneMap(pr.HWCounters)
				if k > quiet {
					n.HWCounters["rq_num_oos"] += 400
				}
			}
			next[i] = n
		}
		cur = next
		r.read(cur...)
		if k == quiet && len(r.events) != 0 {
			t.Fatalf("%d events before the synthetic loss", len(r.events))
		}
		if opens := r.ofState(schemas.StateOpen); opened == nil && len(opens) > 0 {
			opened = opens[0]
		}
	}
	if opened == nil {
		t.Fatal("no incident while rq_num_oos counts 1e-4 of the received packets")
	}
	if opened.Type != schemas.TypeRetransmissions || opened.Subject.Device != "mlx4_0" || opened.Subject.Port != 1 {
		t.Errorf("event %s about %v, want retransmissions on mlx4_0 port 1", opened.Type, opened.Subject)
	}
	rates, _ := opened.Evidence["rates_per_s"].(map[string]any)
	if rates["rq_num_oos"] != 40.0 {
		t.Errorf("evidence rates_per_s %v, want rq_num_oos 40/s", opened.Evidence["rates_per_s"])
	}
	for _, still := range []string{"sq_num_oos", "out_of_sequence"} {
		if _, ok := rates[still]; ok {
			t.Errorf("evidence rates_per_s lists %s, which did not move: %v", still, rates)
		}
	}
	mlx4Check := false
	for _, ch := range opened.Checks {
		mlx4Check = mlx4Check || strings.Contains(ch.Command, "/sys/class/infiniband/mlx4_0/hw_counters/{rq_num_oos")
	}
	if !mlx4Check {
		t.Errorf("checks %v do not read mlx4's device-level counters", opened.Checks)
	}
}
