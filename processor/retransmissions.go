package processor

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// retransCriticalFraction: one received packet in a hundred out of sequence
// makes the incident critical. Go-Back-N resends everything after a lost
// packet, so at that loss a large share of the link carries resends.
const retransCriticalFraction = 1e-2

func init() {
	Register(schemas.TypeRetransmissions, func() Detector { return NewRetransmissions() })
}

// Retransmissions raises retransmissions (layer transport) when a port's
// out-of-sequence packets (out_of_sequence, and duplicate_request: the
// resent packets it already had) per received packet rise well above the
// port's own history and the fabric's: packets are lost on its link and
// Go-Back-N resends them. A RoCE port that always sees some reordering
// (ECMP, adaptive routing) has that reordering in its baseline, and it
// scales with traffic, which is why the figure is per received packet.
//
// The subject is the port whose link loses packets. The senders whose
// packet_seq_err, implied_nak_seq_err or local_ack_timeout_err rise because
// of it are evidence ("peers"); one of them becomes a subject only when no
// port of the fabric shows out-of-sequence excess for QuietFor (the lossy
// receiver is not monitored).
//
// ConnectX-3 (mlx4) ports count the same events under other names:
// rq_num_oos and rq_num_dup on the receiver, sq_num_oos and sq_num_to on
// the senders (counterids_mlx4.go). Frames the MAC dropped as corrupt
// (rx_crc_errors_phy, mlx4_en's rx_crc_errors and rx_errors) are reported
// with the incident, never judged: they say the loss is on the link itself.
type Retransmissions struct {
	// JudgedTunables: the figure they judge is out-of-sequence packets per received packet.
	JudgedTunables
	judged
}

// NewRetransmissions returns the detector with its defaults.
func NewRetransmissions() *Retransmissions {
	d := &Retransmissions{judged: judged{
		typ:   schemas.TypeRetransmissions,
		layer: schemas.LayerTransport,
		primary: append(jc(schemas.SourceHWCounters, "out_of_sequence", "duplicate_request"),
			jc(schemas.SourceHWCounters, retransPrimaryMlx4...)...),
		secondary: append(jc(schemas.SourceHWCounters, "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err"),
			jc(schemas.SourceHWCounters, retransSecondaryMlx4...)...),
		evidenceOnly: jc(schemas.SourceEthtool, retransPhysical...),
		perPacket:    true,
		factor:       8,
		floor:        2e-4, // out of sequence per received packet
		minRate:      20,   // excess out-of-sequence packets per second
		secFloor:     2e-5, // NAKs per transmitted packet
		secondaryRun: 4,
		quietFor:     2 * time.Minute,
		warm:         12,
		baseSpan:     30 * time.Minute,
		policy: Policy{
			OpenAfterSamples:   2,
			OpenAfter:          10 * time.Second,
			ResolveAfter:       2 * time.Minute,
			MinUpdateInterval:  time.Minute,
			SilentResolveAfter: 30 * time.Minute,
		},
	}}
	d.describe = describeRetransmissions
	d.exportTunables(&d.JudgedTunables)
	return d
}

func describeRetransmissions(j *judged, s *Sample, st *judgedPort, secondaryOnly bool) (string, string, []schemas.Check) {
	where := portName(s.ID, s.Netdev)
	severity := schemas.SeverityWarning
	mlx4 := mlx4Counters(s)
	seqErr, ackTimeout := "packet_seq_err", "local_ack_timeout_err"
	nakCounters := "out_of_sequence, packet_seq_err, local_ack_timeout_err"
	if mlx4 {
		seqErr, ackTimeout = "sq_num_oos", "sq_num_to"
		nakCounters = "rq_num_oos, sq_num_oos, sq_num_to"
	}
	var summary string
	if secondaryOnly {
		summary = fmt.Sprintf("%s: %s/s NAK sequence errors and ACK timeouts (%s %s/s, %s %s/s) and no monitored port reports the lost packets: packets to its peers are lost and Go-Back-N resends them",
			where, human(st.peak), seqErr, human(j.rateOf(st, seqErr)), ackTimeout, human(j.rateOf(st, ackTimeout)))
	} else {
		if st.figure >= retransCriticalFraction {
			severity = schemas.SeverityCritical
		}
		summary = fmt.Sprintf("%s: %s out-of-sequence packets/s (%.2g of received packets; its usual %.2g, the fabric's %.2g): packets are lost on its link and Go-Back-N resends them",
			where, human(st.primRate), st.figure, st.base, j.peerRef)
	}
	// Corrupt frames the MAC dropped on the same port: the loss is physical.
	for _, name := range retransPhysical {
		if r := j.rateOf(st, name); r > 0 {
			summary += fmt.Sprintf("; its MAC drops corrupt frames (%s %s/s)", name, human(r))
			break
		}
	}
	nd := netdevOf(s.ID, s.Netdev)
	checks := []schemas.Check{
		onHost(s.ID.Node, fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port), nakCounters+" now"),
	}
	if mlx4 {
		// mlxlink does not know ConnectX-3; the IB error counters and the
		// netdev's MAC errors tell a bad cable there. The diagnostic
		// counters are per device: both ports' traffic is in them.
		checks = append(checks,
			onHost(s.ID.Node, fmt.Sprintf("grep . /sys/class/infiniband/%s/hw_counters/{rq_num_oos,sq_num_oos,sq_num_to,rq_num_dup}", s.ID.Device), "the device's sequence counters (mlx4 counts them per device, both ports together)"),
			onHost(s.ID.Node, fmt.Sprintf("perfquery -C %s -P %d", s.ID.Device, s.ID.Port), "symbol errors and receive errors of the link: a lossy cable"),
			onHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'rx_crc_errors|rx_errors|rx_dropped|pause'", nd), "corrupt frames the MAC dropped and whether pauses come with the loss"))
	} else {
		checks = append(checks,
			onHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -c -e", s.ID.Device, s.ID.Port), "pre-FEC/post-FEC BER and symbol errors of the link: a lossy optic or cable"),
			onHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'discard|out_of_buffer|pause|corrected|crc'", nd), "drops on the port and whether pauses or buffer drops come with the loss"))
	}
	checks = append(checks,
		onSwitch(j.fabric, s.ID, "errors, discards and FEC"),
		inRdmawatch(fmt.Sprintf("events --node %s --type ber_drift,link_flap", s.ID.Node), "a BER drift or flap of the same link that explains the loss"))
	return summary, severity, checks
}
