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
type Retransmissions struct {
	// JudgedTunables: the figure they judge is out-of-sequence packets per received packet.
	JudgedTunables
	judged
}

// NewRetransmissions returns the detector with its defaults.
func NewRetransmissions() *Retransmissions {
	d := &Retransmissions{judged: judged{
		typ:          schemas.TypeRetransmissions,
		layer:        schemas.LayerTransport,
		primary:      jc(schemas.SourceHWCounters, "out_of_sequence", "duplicate_request"),
		secondary:    jc(schemas.SourceHWCounters, "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err"),
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
	var summary string
	if secondaryOnly {
		summary = fmt.Sprintf("%s: %s/s NAK sequence errors and ACK timeouts (packet_seq_err %s/s, local_ack_timeout_err %s/s) and no monitored port reports the lost packets: packets to its peers are lost and Go-Back-N resends them",
			where, human(st.peak), human(j.rateOf(st, "packet_seq_err")), human(j.rateOf(st, "local_ack_timeout_err")))
	} else {
		if st.figure >= retransCriticalFraction {
			severity = schemas.SeverityCritical
		}
		summary = fmt.Sprintf("%s: %s out-of-sequence packets/s (%.2g of received packets; its usual %.2g, the fabric's %.2g): packets are lost on its link and Go-Back-N resends them",
			where, human(st.primRate), st.figure, st.base, j.peerRef)
	}
	nd := netdevOf(s.ID, s.Netdev)
	checks := []schemas.Check{
		onHost(s.ID.Node, fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port), "out_of_sequence, packet_seq_err, local_ack_timeout_err now"),
		onHost(s.ID.Node, fmt.Sprintf("mlxlink -d %s -p %d -c -e", s.ID.Device, s.ID.Port), "pre-FEC/post-FEC BER and symbol errors of the link: a lossy optic or cable"),
		onHost(s.ID.Node, fmt.Sprintf("ethtool -S %s | grep -E 'discard|out_of_buffer|pause|corrected'", nd), "drops on the port and whether pauses or buffer drops come with the loss"),
		onSwitch(j.fabric, s.ID, "errors, discards and FEC"),
		inRdmawatch(fmt.Sprintf("events --node %s --type ber_drift,link_flap", s.ID.Node), "a BER drift or flap of the same link that explains the loss"),
	}
	return summary, severity, checks
}
