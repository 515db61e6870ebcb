// Package receivestarvation is the receive_starvation detector (layer
// application): a receiver that does not post buffers or drain its queues
// (Detector). It registers itself with processor.Register;
// processor/detect/all links it in.
package receivestarvation

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/judged"
	"github.com/rdmawatch/rdmawatch/processor/detect/pause"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeReceiveStarvation, func() processor.Detector { return New() })
}

// Detector raises receive_starvation (layer application) when a
// port drops received packets for want of posted receive buffers
// (out_of_buffer, ethtool rx_out_of_buffer) or of NIC buffer
// (rx_discards_phy), well above its own history and the fabric's, for
// longer than an incast burst: the receiver does not post buffers or drain
// its queues fast enough (CQ polling lag, small queues, PCIe or CPU).
//
// A brief blip under incast is not an incident: the condition must hold
// for OpenAfter (policy) before an incident opens, and one sample below the
// limit while pending drops it. One starving receiver is one incident: the
// senders whose RNR retries run out (rnr_nak_retry_err) are its evidence
// ("peers"), and become subjects only when no monitored port starves.
type Detector struct {
	// JudgedTunables: the figure they judge is dropped packets per second.
	judged.Tunables
	*judged.Engine // a pointer: the engine's fields are no settings (see processor.Settings)
}

// New returns the detector with its defaults.
func New() *Detector {
	d := &Detector{Engine: &judged.Engine{
		Type:  schemas.TypeReceiveStarvation,
		Layer: schemas.LayerApplication,
		// mlx4 (see judged/counterids_mlx4.go): rq_num_rnr counts the RNR NAKs
		// the responder sends because no receive was posted, each a
		// refused packet; rq_num_udsdprd the UD packets it silently
		// dropped for want of a receive descriptor. sq_num_rnr and
		// sq_num_rree are the requester's side, like rnr_nak_retry_err.
		Primary: append(judged.Counters(schemas.SourceHWCounters, "out_of_buffer", "rq_num_rnr", "rq_num_udsdprd"),
			judged.Counters(schemas.SourceEthtool, "rx_out_of_buffer", "rx_discards_phy")...),
		Secondary:    judged.Counters(schemas.SourceHWCounters, "rnr_nak_retry_err", "sq_num_rnr", "sq_num_rree"),
		Factor:       8,
		Floor:        20, // dropped packets per second
		MinRate:      20,
		SecFloor:     5, // RNR retries exhausted per second
		SecondaryRun: 6,
		QuietFor:     2 * time.Minute,
		Warm:         12,
		BaseSpan:     30 * time.Minute,
		Policy: processor.Policy{
			OpenAfterSamples:   3,
			OpenAfter:          25 * time.Second,
			ResolveAfter:       2 * time.Minute,
			MinUpdateInterval:  time.Minute,
			SilentResolveAfter: 30 * time.Minute,
		},
	}}
	d.Describe = describeStarvation
	d.ExportTunables(&d.Tunables)
	d.Veto = pausesItsLink
	return d
}

// StormPauseFraction is the share of an interval a port must pause its
// link (tx pause duration of its busiest priority, or of the IEEE 802.3x
// global pause, which stops every priority) for its buffer drops to count
// as part of its own PFC storm.
const StormPauseFraction = 0.5

// pausesItsLink reports whether the port paused its link for most of the
// sample's interval, by pfc_storm's reading of the pause counters
// (per-priority or global). Drops that begin together with such a pause
// storm are the storm's (pfc_storm holds the incident, the drops are its
// evidence); a starvation seen before the storm is an incident of its own,
// and the storm's cause.
func pausesItsLink(s *processor.Sample) bool {
	f, ok := pause.TxFraction(s.PortSample)
	return ok && f >= StormPauseFraction
}

func describeStarvation(j *judged.Engine, s *processor.Sample, st *judged.Port, secondaryOnly bool) (string, string, []schemas.Check) {
	where := processor.PortName(s.ID, s.Netdev)
	severity := schemas.SeverityWarning
	var summary string
	if secondaryOnly {
		var parts []string
		for _, c := range j.Secondary {
			if r := j.RateOf(st, c.Name); r > 0 {
				parts = append(parts, fmt.Sprintf("%s %s/s", c.Name, processor.HumanRate(r)))
			}
		}
		summary = fmt.Sprintf("%s: its receive-not-ready retries run out (%s) and no monitored receiver reports dropping: a peer does not post receive buffers",
			where, strings.Join(parts, ", "))
	} else {
		if st.PrimRate >= 1000 || j.RateOf(st, "rx_discards_phy") >= j.Floor {
			severity = schemas.SeverityCritical
		}
		var parts []string
		for _, c := range j.Primary {
			if r := j.RateOf(st, c.Name); r > 0 {
				parts = append(parts, fmt.Sprintf("%s %s/s", c.Name, processor.HumanRate(r)))
			}
		}
		summary = fmt.Sprintf("%s: does not drain its receive queue (%s; its usual %s/s) since %s",
			where, strings.Join(parts, ", "), processor.HumanRate(st.Base), st.Since)
	}
	nd := processor.NetdevOf(s.ID, s.Netdev)
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'out_of_buffer|discards|pause'", nd), "buffer drops and the pauses the port sends because of them"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port), "out_of_buffer and rnr_nak_retry_err now"),
		processor.OnHost(s.ID.Node, "top -b -n1 -o %CPU | head -20; cat /proc/interrupts | grep -c mlx5", "CPU saturation of the polling threads and where the NIC's interrupts land"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("ethtool -g %s; ethtool -l %s", nd, nd), "ring sizes and channels: small receive queues"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("lspci -vvv -s $(basename $(readlink /sys/class/infiniband/%s/device)) | grep -E 'LnkSta|MaxReadReq'", s.ID.Device), "PCIe link width and speed: a degraded slot cannot drain"),
	}
	return summary, severity, checks
}
