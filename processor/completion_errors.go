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
		primary: jc(schemas.SourceHWCounters, "req_cqe_error", "resp_cqe_error", "req_remote_access_errors",
			"req_remote_invalid_request", "resp_local_length_error", "resp_remote_access_errors"),
		evidenceOnly: jc(schemas.SourceHWCounters, "req_cqe_flush_error", "resp_cqe_flush_error"),
		factor:       5,
		floor:        0.5, // errors per second
		minRate:      0.5,
		warm:         12,
		baseSpan:     30 * time.Minute,
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
	where := portName(s.ID, s.Netdev)
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
	summary := fmt.Sprintf("%s: %s failed completions/s (mostly %s %s/s; flushes %s/s) since %s: an application's memory registration or requests are wrong",
		where, human(st.primRate), worst, human(worstRate), human(j.rateOf(st, "req_cqe_flush_error")+j.rateOf(st, "resp_cqe_flush_error")), st.since)
	checks := []schemas.Check{
		onHost(s.ID.Node, fmt.Sprintf("rdma statistic show link %s/%d", s.ID.Device, s.ID.Port), "which completion error counters rise now"),
		onHost(s.ID.Node, fmt.Sprintf("rdma resource show qp link %s/%d", s.ID.Device, s.ID.Port), "QPs in the ERR state and the processes that own them"),
		onHost(s.ID.Node, "dmesg -T | grep -iE 'mlx5.*(cqe|syndrome|err)' | tail -20", "CQE syndromes the driver logged"),
		onHost(s.ID.Node, "journalctl --since '-30 min' | grep -iE 'ibv_|rdma|nccl|ucx' | tail -20", "the application that reports the failed work requests"),
	}
	return summary, severity, checks
}
