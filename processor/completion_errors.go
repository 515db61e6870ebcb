package processor

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	Register(schemas.TypeCompletionErrors, func() Detector { return NewCompletionErrors() })
}

// CompletionErrors raises completion_errors (layer application) when a
// port's work completions fail: req_cqe_error, resp_cqe_error, remote access
// and invalid request errors, local length errors, above the port's own
// history and at a sustained rate: memory registration or protocol errors
// of an application. Flush errors (req_cqe_flush_error,
// resp_cqe_flush_error) follow other errors, when a QP in error flushes its
// queue: they are evidence, never a trigger on their own.
//
// ConnectX-3 (mlx4) ports have no sum of failed completions; they count
// each kind (sq_/rq_num_lle, lqpoe, lpe, rae, rire, sq_num_mwbe, bre, roe,
// tree, rree: counterids_mlx4.go), and the judged figure is their sum.
// Their sq_/rq_num_wrfe count every error CQE, flushes included, so like
// mlx5's flush counters they are evidence only.
//
// One fault is one incident (judged_group.go): the requester whose work
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
// receiver posted no buffer: the summary says so, and causes.go links the
// incident to that receiver's receive_starvation.
type CompletionErrors struct {
	// JudgedTunables: the figure they judge is failed completions per second.
	JudgedTunables
	judged
}

// NewCompletionErrors returns the detector with its defaults.
func NewCompletionErrors() *CompletionErrors {
	d := &CompletionErrors{judged: judged{
		typ:   schemas.TypeCompletionErrors,
		layer: schemas.LayerApplication,
		primary: append(jc(schemas.SourceHWCounters, "req_cqe_error", "resp_cqe_error", "req_remote_access_errors",
			"req_remote_invalid_request", "resp_local_length_error", "resp_remote_access_errors"),
			jc(schemas.SourceHWCounters, completionPrimaryMlx4...)...),
		evidenceOnly: append(jc(schemas.SourceHWCounters, "req_cqe_flush_error", "resp_cqe_flush_error", "rnr_nak_retry_err"),
			jc(schemas.SourceHWCounters, completionEvidenceMlx4...)...),
		group:    true,
		factor:   5,
		floor:    0.5, // errors per second
		minRate:  0.5,
		warm:     12,
		baseSpan: 30 * time.Minute,
		policy: Policy{
			OpenAfterSamples:   2,
			ResolveAfter:       3 * time.Minute,
			MinUpdateInterval:  time.Minute,
			SilentResolveAfter: 30 * time.Minute,
		},
	}}
	d.describe = describeCompletionErrors
	d.exportTunables(&d.JudgedTunables)
	return d
}

func describeCompletionErrors(j *judged, s *Sample, st *judgedPort, _ bool) (string, string, []schemas.Check) {
	where := PortName(s.ID, s.Netdev)
	severity := schemas.SeverityWarning
	if st.primRate >= 100 {
		severity = schemas.SeverityCritical
	}
	worst, worstRate := "", 0.0
	for _, c := range j.primary {
		if r := j.rateOf(st, c.name); r > worstRate {
			worst, worstRate = c.name, r
		}
	}
	mlx4 := mlx4Counters(s)
	flushes, flushWhat, driver := j.rateOf(st, "req_cqe_flush_error")+j.rateOf(st, "resp_cqe_flush_error"), "flushes", "mlx5"
	if mlx4 {
		flushes, flushWhat, driver = j.rateOf(st, "sq_num_wrfe")+j.rateOf(st, "rq_num_wrfe"), "error CQEs with flushes", "mlx4"
	}
	why := "an application's memory registration or requests are wrong"
	switch {
	case rnrRate(j, st) > 0:
		why = "its receive-not-ready retries run out: a receiver does not post buffers fast enough"
	case j.rateOf(st, "sq_num_tree") > 0:
		why = "its transport retries run out: packets or ACKs are lost, or the peer is gone"
	}
	summary := fmt.Sprintf("%s: %s failed completions/s (mostly %s %s/s; %s %s/s) since %s: %s",
		where, HumanRate(st.primRate), worst, HumanRate(worstRate), flushWhat, HumanRate(flushes), st.since, why)
	stats := fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port)
	if mlx4 {
		// The diagnostic counters of an mlx4 device are per device.
		stats = fmt.Sprintf("grep . /sys/class/infiniband/%s/hw_counters/*", s.ID.Device)
	}
	checks := []schemas.Check{
		OnHost(s.ID.Node, stats, "which completion error counters rise now"),
		OnHost(s.ID.Node, fmt.Sprintf("rdma resource show qp link %s/%d", s.ID.Device, s.ID.Port), "QPs in the ERR state and the processes that own them"),
		OnHost(s.ID.Node, "dmesg -T | grep -iE '"+driver+".*(cqe|syndrome|err)' | tail -20", "CQE syndromes the driver logged"),
		OnHost(s.ID.Node, "journalctl --since '-30 min' | grep -iE 'ibv_|rdma|nccl|ucx' | tail -20", "the application that reports the failed work requests"),
	}
	if rnrRate(j, st) > 0 {
		checks = append(checks, InRdmawatch("events --type receive_starvation", "the receiver that does not post buffers: its out_of_buffer or RNR NAKs sent"))
	}
	return summary, severity, checks
}

// rnrRate is the port's latest rate of RNR NAKs received and RNR retries
// run out.
func rnrRate(j *judged, st *judgedPort) float64 {
	var r float64
	for _, name := range RNRRetryCounters {
		r += j.rateOf(st, name)
	}
	return r
}
