package judged

import (
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// The counters of ConnectX-3 (mlx4) ports, and what the detectors read them
// as. An mlx4 device exposes its diagnostic counters once per device
// (/sys/class/infiniband/mlx4_N/hw_counters), and per port only where the
// firmware supports it; the collector attaches the device's set to its
// lowest port. A port has either these names or mlx5's q-counters, never
// both, so the detectors list both sets and the evidence keeps the names
// the driver uses.
//
// Meanings, from the kernel (drivers/infiniband/hw/mlx4/main.c, diag_basic,
// diag_ext and diag_device_only; commit 3f85f2aaabf7 "IB/mlx4: Add
// diagnostic hardware counters": rq_ is the responder, sq_ the requester)
// and the ConnectX PRM's "Transport and CI Error Counters" (as carried in
// iPXE's hermon PRM header, struct hermonprm_transport_and_ci_error_counters_st),
// with the mlx5 q-counter that counts the same event:
//
//	rq_num_oos    responder: out-of-sequence requests received   ~ out_of_sequence
//	rq_num_dup    responder: duplicate requests received         ~ duplicate_request
//	sq_num_oos    requester: NAK-sequence-error received         ~ packet_seq_err
//	sq_num_to     requester: ACK timeouts (transport retries)    ~ local_ack_timeout_err
//	sq_num_rnr    requester: RNR NAKs received (retried)         ~ rnr_nak_retry_err
//	rq_num_rnr    responder: RNR NAKs sent (no receive posted)   (no mlx5 q-counter)
//	sq_num_rree   requester: RNR NAK retries exceeded (an error CQE; mlx5 6.11+: req_rnr_retries_exceeded)
//	sq_num_tree   requester: transport retries exceeded (an error CQE; mlx5: req_transport_retries_exceeded)
//	*_num_lle     local length errors                            ~ resp_local_length_error
//	*_num_lqpoe   local QP operation errors
//	*_num_lpe     local protection errors
//	sq_num_mwbe   memory window bind errors
//	sq_num_bre    bad response errors
//	*_num_rire    remote invalid request errors                  ~ req_remote_invalid_request
//	*_num_rae     remote access errors                           ~ req/resp_remote_access_errors
//	sq_num_roe    remote operation errors
//	*_num_wrfe    CQEs with error, flushes included              ~ req/resp_cqe_error + *_cqe_flush_error
//
// The wrfe counters are not the flush counters their name suggests: the PRM
// says "number of CQEs with error, incremented each time a CQE with error is
// generated", and NVIDIA's ConnectX-3 counter list (WinOF "Proprietary
// Mellanox Adapter Diagnostics Counters", "Requester/Responder CQE errors")
// warns that an application tearing down with receives still posted counts
// there through its "flushed with error" completions. So they are evidence
// only: a teardown is no incident, and the specific error counters above,
// each a failed completion, carry the judgement.
//
// rx_crc_errors and rx_errors are mlx4_en's ethtool statistics (rx_errors
// sums the frames the MAC dropped: CRC, length, runts, jabbers); mlx5 shows
// the same corruption as rx_crc_errors_phy. A corrupt packet on an mlx4 link
// shows in rq_num_oos (the packets after it arrive out of sequence) and in
// these, nowhere else.
// MLX4 reports whether the sample carries any of mlx4's diagnostic
// counters (the device's lowest port does): summaries and checks then name
// mlx4's counters and tools. Called when a finding is described, not per
// sample.
func MLX4(s *processor.Sample) bool {
	for _, id := range idsMlx4 {
		if _, ok := s.CounterByID(id); ok {
			return true
		}
	}
	return false
}

// idsMlx4 are the mlx4 diagnostic counters the detectors read.
var idsMlx4 = func() []schemas.CounterID {
	var ids []schemas.CounterID
	for _, set := range [][]string{RetransPrimaryMLX4, RetransSecondaryMLX4, CompletionPrimaryMLX4, CompletionEvidenceMLX4} {
		for _, n := range set {
			ids = append(ids, schemas.MustCounterID(schemas.SourceHWCounters, n))
		}
	}
	return ids
}()

// Retransmissions' counters per driver (see the table above).
var (
	RetransPrimaryMLX4   = []string{"rq_num_oos", "rq_num_dup"}
	RetransSecondaryMLX4 = []string{"sq_num_oos", "sq_num_to"}
	// RetransPhysical are the frames the port's MAC dropped as corrupt:
	// evidence that the loss is on the link itself (mlx5, then mlx4_en).
	RetransPhysical = []string{"rx_crc_errors_phy", "rx_crc_errors", "rx_errors"}
)

// Completion errors' counters per driver.
var (
	CompletionPrimaryMLX4 = []string{
		"sq_num_lle", "rq_num_lle", "sq_num_lqpoe", "rq_num_lqpoe", "sq_num_lpe", "rq_num_lpe",
		"sq_num_mwbe", "sq_num_bre", "sq_num_rire", "rq_num_rire", "sq_num_rae", "rq_num_rae",
		"sq_num_roe", "sq_num_tree", "sq_num_rree",
	}
	// CompletionEvidenceMLX4: every error CQE (flushes included) and the
	// RNR NAKs the requester received and retried.
	CompletionEvidenceMLX4 = []string{"sq_num_wrfe", "rq_num_wrfe", "sq_num_rnr"}
)
