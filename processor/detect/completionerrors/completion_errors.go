// Package completionerrors is the completion_errors detector (layer
// application): failing work completions, one incident per fault
// (Detector). It registers itself with processor.Register;
// processor/detect/all links it in.
package completionerrors

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/judged"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeCompletionErrors, func() processor.Detector { return New() })
}

// Detector raises completion_errors (layer application) when a
// port's work completions fail: req_cqe_error, resp_cqe_error, remote access
// and invalid request errors, local length errors, above the port's own
// history and at a sustained rate: memory registration or protocol errors
// of an application. Flush errors (req_cqe_flush_error,
// resp_cqe_flush_error) follow other errors, when a QP in error flushes its
// queue: they are evidence, never a trigger on their own.
//
// ConnectX-3 (mlx4) ports have no sum of failed completions; they count
// each kind (sq_/rq_num_lle, lqpoe, lpe, rae, rire, sq_num_mwbe, bre, roe,
// tree, rree: judged/counterids_mlx4.go), and the judged figure is their sum.
// Their sq_/rq_num_wrfe count every error CQE, flushes included, so like
// mlx5's flush counters they are evidence only.
//
// One fault is one incident (judged/judged_group.go): the requester whose work
// requests fail (req_* errors and flushes, mlx4 sq_*) is the subject; the
// responders counting resp_remote_access_errors, resp_local_length_error
// and the like at the same moment are `affected`, each with its rate and
// counter (schemas.Affected RatePerS, Counter). When no monitored
// requester shows errors, the responders of one moment are one incident:
// the subject is the one with the highest error rate, the others
// affected.
//
// RNR NAKs the requester got (rnr_nak_retry_err, mlx4 sq_num_rnr) and RNR
// retries run out (mlx4 sq_num_rree) say the completions failed because a
// receiver posted no buffer: the summary says so, and processor.Causes
// links the incident to that receiver's receive_starvation.
type Detector struct {
	// JudgedTunables: the figure they judge is failed completions per second.
	judged.Tunables
	*judged.Engine // a pointer: the engine's fields are no settings (see processor.Settings)
}

// New returns the detector with its defaults.
func New() *Detector {
	d := &Detector{Engine: &judged.Engine{
		Type:  schemas.TypeCompletionErrors,
		Layer: schemas.LayerApplication,
		Primary: append(judged.Counters(schemas.SourceHWCounters, "req_cqe_error", "resp_cqe_error", "req_remote_access_errors",
			"req_remote_invalid_request", "resp_local_length_error", "resp_remote_access_errors"),
			judged.Counters(schemas.SourceHWCounters, judged.CompletionPrimaryMLX4...)...),
		EvidenceOnly: append(judged.Counters(schemas.SourceHWCounters, "req_cqe_flush_error", "resp_cqe_flush_error", "rnr_nak_retry_err"),
			judged.Counters(schemas.SourceHWCounters, judged.CompletionEvidenceMLX4...)...),
		Group:    true,
		Factor:   5,
		Floor:    0.5, // errors per second
		MinRate:  0.5,
		Warm:     12,
		BaseSpan: 30 * time.Minute,
		Policy: processor.Policy{
			OpenAfterSamples:   2,
			ResolveAfter:       3 * time.Minute,
			MinUpdateInterval:  time.Minute,
			SilentResolveAfter: 30 * time.Minute,
		},
	}}
	d.Describe = describeCompletionErrors
	d.ExportTunables(&d.Tunables)
	return d
}

func describeCompletionErrors(j *judged.Engine, s *processor.Sample, st *judged.Port, _ bool) (string, string, []schemas.Check) {
	where := processor.PortName(s.ID, s.Netdev)
	severity := schemas.SeverityWarning
	if st.PrimRate >= 100 {
		severity = schemas.SeverityCritical
	}
	worst, worstRate := "", 0.0
	for _, c := range j.Primary {
		if r := j.RateOf(st, c.Name); r > worstRate {
			worst, worstRate = c.Name, r
		}
	}
	mlx4 := judged.MLX4(s)
	flushes, flushWhat, driver := j.RateOf(st, "req_cqe_flush_error")+j.RateOf(st, "resp_cqe_flush_error"), "flushes", "mlx5"
	if mlx4 {
		flushes, flushWhat, driver = j.RateOf(st, "sq_num_wrfe")+j.RateOf(st, "rq_num_wrfe"), "error CQEs with flushes", "mlx4"
	}
	why := "an application's memory registration or requests are wrong"
	switch {
	case rnrRate(j, st) > 0:
		why = "its receive-not-ready retries run out: a receiver does not post buffers fast enough"
	case j.RateOf(st, "sq_num_tree") > 0:
		why = "its transport retries run out: packets or ACKs are lost, or the peer is gone"
	}
	summary := fmt.Sprintf("%s: %s failed completions/s (mostly %s %s/s; %s %s/s) since %s: %s",
		where, processor.HumanRate(st.PrimRate), worst, processor.HumanRate(worstRate), flushWhat, processor.HumanRate(flushes), st.Since, why)
	stats := fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port)
	if mlx4 {
		// The diagnostic counters of an mlx4 device are per device.
		stats = fmt.Sprintf("grep . /sys/class/infiniband/%s/hw_counters/*", s.ID.Device)
	}
	checks := []schemas.Check{
		processor.OnHost(s.ID.Node, stats, "which completion error counters rise now"),
		processor.OnHost(s.ID.Node, fmt.Sprintf("rdma resource show qp link %s/%d", s.ID.Device, s.ID.Port), "QPs in the ERR state and the processes that own them"),
		processor.OnHost(s.ID.Node, "dmesg -T | grep -iE '"+driver+".*(cqe|syndrome|err)' | tail -20", "CQE syndromes the driver logged"),
		processor.OnHost(s.ID.Node, "journalctl --since '-30 min' | grep -iE 'ibv_|rdma|nccl|ucx' | tail -20", "the application that reports the failed work requests"),
	}
	if rnrRate(j, st) > 0 {
		checks = append(checks, processor.InRdmawatch("events --type receive_starvation", "the receiver that does not post buffers: its out_of_buffer or RNR NAKs sent"))
	}
	return summary, severity, checks
}

// rnrRate is the port's latest rate of RNR NAKs received and RNR retries
// run out.
func rnrRate(j *judged.Engine, st *judged.Port) float64 {
	var r float64
	for _, name := range processor.RNRRetryCounters {
		r += j.RateOf(st, name)
	}
	return r
}
