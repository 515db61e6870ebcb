package schemas

// counterDict numbers the counters rdmawatch knows, so the wire carries an
// index bit instead of a name. APPEND ONLY: an index, once shipped, names
// the same counter forever (decoders of any age agree on it). Counters not
// listed here travel by name.
var counterDict = [...]struct {
	src  Source
	name string
}{
	// ports/<p>/counters (InfiniBand PortCounters and extended counters)
	{SourceCounters, "symbol_error"},
	{SourceCounters, "link_error_recovery"},
	{SourceCounters, "link_downed"},
	{SourceCounters, "port_rcv_errors"},
	{SourceCounters, "port_rcv_remote_physical_errors"},
	{SourceCounters, "port_rcv_switch_relay_errors"},
	{SourceCounters, "port_xmit_discards"},
	{SourceCounters, "port_xmit_constraint_errors"},
	{SourceCounters, "port_rcv_constraint_errors"},
	{SourceCounters, "local_link_integrity_errors"},
	{SourceCounters, "excessive_buffer_overrun_errors"},
	{SourceCounters, "VL15_dropped"},
	{SourceCounters, "port_xmit_data"},
	{SourceCounters, "port_rcv_data"},
	{SourceCounters, "port_xmit_packets"},
	{SourceCounters, "port_rcv_packets"},
	{SourceCounters, "port_xmit_wait"},
	{SourceCounters, "unicast_xmit_packets"},
	{SourceCounters, "unicast_rcv_packets"},
	{SourceCounters, "multicast_xmit_packets"},
	{SourceCounters, "multicast_rcv_packets"},
	// ports/<p>/hw_counters (mlx5)
	{SourceHWCounters, "np_ecn_marked_roce_packets"},
	{SourceHWCounters, "np_cnp_sent"},
	{SourceHWCounters, "rp_cnp_handled"},
	{SourceHWCounters, "rp_cnp_ignored"},
	{SourceHWCounters, "out_of_buffer"},
	{SourceHWCounters, "out_of_sequence"},
	{SourceHWCounters, "packet_seq_err"},
	{SourceHWCounters, "local_ack_timeout_err"},
	{SourceHWCounters, "duplicate_request"},
	{SourceHWCounters, "implied_nak_seq_err"},
	{SourceHWCounters, "rnr_nak_retry_err"},
	{SourceHWCounters, "req_cqe_error"},
	{SourceHWCounters, "req_cqe_flush_error"},
	{SourceHWCounters, "req_remote_access_errors"},
	{SourceHWCounters, "req_remote_invalid_request"},
	{SourceHWCounters, "resp_cqe_error"},
	{SourceHWCounters, "resp_cqe_flush_error"},
	{SourceHWCounters, "resp_local_length_error"},
	{SourceHWCounters, "resp_remote_access_errors"},
	{SourceHWCounters, "roce_adp_retrans"},
	{SourceHWCounters, "roce_adp_retrans_to"},
	{SourceHWCounters, "roce_slow_restart"},
	{SourceHWCounters, "roce_slow_restart_cnps"},
	{SourceHWCounters, "roce_slow_restart_trans"},
	{SourceHWCounters, "rx_atomic_requests"},
	{SourceHWCounters, "rx_dct_connect"},
	{SourceHWCounters, "rx_read_requests"},
	{SourceHWCounters, "rx_write_requests"},
	{SourceHWCounters, "rx_icrc_encapsulated"},
	{SourceHWCounters, "np_cnp_sent_roce"},
	// ethtool -S (mlx5): PFC per priority, the storm watchdog, PHY and FEC
	{SourceEthtool, "rx_prio0_pause"}, {SourceEthtool, "rx_prio1_pause"}, {SourceEthtool, "rx_prio2_pause"}, {SourceEthtool, "rx_prio3_pause"},
	{SourceEthtool, "rx_prio4_pause"}, {SourceEthtool, "rx_prio5_pause"}, {SourceEthtool, "rx_prio6_pause"}, {SourceEthtool, "rx_prio7_pause"},
	{SourceEthtool, "tx_prio0_pause"}, {SourceEthtool, "tx_prio1_pause"}, {SourceEthtool, "tx_prio2_pause"}, {SourceEthtool, "tx_prio3_pause"},
	{SourceEthtool, "tx_prio4_pause"}, {SourceEthtool, "tx_prio5_pause"}, {SourceEthtool, "tx_prio6_pause"}, {SourceEthtool, "tx_prio7_pause"},
	{SourceEthtool, "rx_prio0_pause_duration"}, {SourceEthtool, "rx_prio1_pause_duration"}, {SourceEthtool, "rx_prio2_pause_duration"}, {SourceEthtool, "rx_prio3_pause_duration"},
	{SourceEthtool, "rx_prio4_pause_duration"}, {SourceEthtool, "rx_prio5_pause_duration"}, {SourceEthtool, "rx_prio6_pause_duration"}, {SourceEthtool, "rx_prio7_pause_duration"},
	{SourceEthtool, "tx_prio0_pause_duration"}, {SourceEthtool, "tx_prio1_pause_duration"}, {SourceEthtool, "tx_prio2_pause_duration"}, {SourceEthtool, "tx_prio3_pause_duration"},
	{SourceEthtool, "tx_prio4_pause_duration"}, {SourceEthtool, "tx_prio5_pause_duration"}, {SourceEthtool, "tx_prio6_pause_duration"}, {SourceEthtool, "tx_prio7_pause_duration"},
	{SourceEthtool, "rx_prio0_pause_transition"}, {SourceEthtool, "rx_prio1_pause_transition"}, {SourceEthtool, "rx_prio2_pause_transition"}, {SourceEthtool, "rx_prio3_pause_transition"},
	{SourceEthtool, "rx_prio4_pause_transition"}, {SourceEthtool, "rx_prio5_pause_transition"}, {SourceEthtool, "rx_prio6_pause_transition"}, {SourceEthtool, "rx_prio7_pause_transition"},
	{SourceEthtool, "tx_pause_storm_warning_events"},
	{SourceEthtool, "tx_pause_storm_error_events"},
	{SourceEthtool, "rx_bits_phy"},
	{SourceEthtool, "rx_corrected_bits_phy"},
	{SourceEthtool, "rx_pcs_symbol_err_phy"},
	{SourceEthtool, "rx_symbol_err_phy"},
	{SourceEthtool, "rx_err_lane_0_phy"}, {SourceEthtool, "rx_err_lane_1_phy"}, {SourceEthtool, "rx_err_lane_2_phy"}, {SourceEthtool, "rx_err_lane_3_phy"},
	{SourceEthtool, "rx_err_lane_4_phy"}, {SourceEthtool, "rx_err_lane_5_phy"}, {SourceEthtool, "rx_err_lane_6_phy"}, {SourceEthtool, "rx_err_lane_7_phy"},
	{SourceEthtool, "link_down_events_phy"},
	{SourceEthtool, "rx_discards_phy"},
	{SourceEthtool, "tx_discards_phy"},
	{SourceEthtool, "rx_out_of_buffer"},
	{SourceEthtool, "rx_crc_errors_phy"},
	{SourceEthtool, "rx_in_range_len_errors_phy"},
	{SourceEthtool, "rx_buffer_passed_thres_phy"},
	{SourceEthtool, "rx_packets_phy"},
	{SourceEthtool, "tx_packets_phy"},
	{SourceEthtool, "rx_bytes_phy"},
	{SourceEthtool, "tx_bytes_phy"},
	{SourceEthtool, "rx_pause_ctrl_phy"},
	{SourceEthtool, "tx_pause_ctrl_phy"},
	{SourceEthtool, "rx_prio0_buf_discard"}, {SourceEthtool, "rx_prio1_buf_discard"}, {SourceEthtool, "rx_prio2_buf_discard"}, {SourceEthtool, "rx_prio3_buf_discard"},
	{SourceEthtool, "rx_prio4_buf_discard"}, {SourceEthtool, "rx_prio5_buf_discard"}, {SourceEthtool, "rx_prio6_buf_discard"}, {SourceEthtool, "rx_prio7_buf_discard"},
	{SourceEthtool, "rx_prio0_cong_discard"}, {SourceEthtool, "rx_prio1_cong_discard"}, {SourceEthtool, "rx_prio2_cong_discard"}, {SourceEthtool, "rx_prio3_cong_discard"},
	{SourceEthtool, "rx_prio4_cong_discard"}, {SourceEthtool, "rx_prio5_cong_discard"}, {SourceEthtool, "rx_prio6_cong_discard"}, {SourceEthtool, "rx_prio7_cong_discard"},
	{SourceEthtool, "rx_prio0_marked"}, {SourceEthtool, "rx_prio1_marked"}, {SourceEthtool, "rx_prio2_marked"}, {SourceEthtool, "rx_prio3_marked"},
	{SourceEthtool, "rx_prio4_marked"}, {SourceEthtool, "rx_prio5_marked"}, {SourceEthtool, "rx_prio6_marked"}, {SourceEthtool, "rx_prio7_marked"},
	{SourceEthtool, "rx_prio0_bytes"}, {SourceEthtool, "rx_prio1_bytes"}, {SourceEthtool, "rx_prio2_bytes"}, {SourceEthtool, "rx_prio3_bytes"},
	{SourceEthtool, "rx_prio4_bytes"}, {SourceEthtool, "rx_prio5_bytes"}, {SourceEthtool, "rx_prio6_bytes"}, {SourceEthtool, "rx_prio7_bytes"},
	{SourceEthtool, "tx_prio0_bytes"}, {SourceEthtool, "tx_prio1_bytes"}, {SourceEthtool, "tx_prio2_bytes"}, {SourceEthtool, "tx_prio3_bytes"},
	{SourceEthtool, "tx_prio4_bytes"}, {SourceEthtool, "tx_prio5_bytes"}, {SourceEthtool, "tx_prio6_bytes"}, {SourceEthtool, "tx_prio7_bytes"},
	// ethtool -S (mlx5): IEEE 802.3x global pause, what a port on link-level
	// flow control counts instead of the per-priority counters
	// (mlx5e_stats.c, pport_global_pause counters: the pause of every priority).
	{SourceEthtool, "rx_global_pause"}, {SourceEthtool, "tx_global_pause"},
	{SourceEthtool, "rx_global_pause_duration"}, {SourceEthtool, "tx_global_pause_duration"},
	{SourceEthtool, "rx_global_pause_transition"},
	// ethtool -S (mlx4_en): global pause and the netdev's error counters
	{SourceEthtool, "rx_pause"}, {SourceEthtool, "tx_pause"},
	{SourceEthtool, "rx_pause_duration"}, {SourceEthtool, "tx_pause_duration"},
	{SourceEthtool, "rx_pause_transition"}, {SourceEthtool, "tx_pause_transition"},
	{SourceEthtool, "rx_errors"}, {SourceEthtool, "rx_crc_errors"}, {SourceEthtool, "rx_dropped"},
	// hw_counters of mlx4 devices (drivers/infiniband/hw/mlx4/main.c,
	// diag_basic, diag_ext and diag_device_only): responder (rq_) and
	// requester (sq_) error and sequence counters.
	{SourceHWCounters, "rq_num_lle"}, {SourceHWCounters, "sq_num_lle"},
	{SourceHWCounters, "rq_num_lqpoe"}, {SourceHWCounters, "sq_num_lqpoe"},
	{SourceHWCounters, "rq_num_lpe"}, {SourceHWCounters, "sq_num_lpe"},
	{SourceHWCounters, "rq_num_wrfe"}, {SourceHWCounters, "sq_num_wrfe"},
	{SourceHWCounters, "sq_num_mwbe"}, {SourceHWCounters, "sq_num_bre"},
	{SourceHWCounters, "sq_num_rire"}, {SourceHWCounters, "rq_num_rire"},
	{SourceHWCounters, "sq_num_rae"}, {SourceHWCounters, "rq_num_rae"},
	{SourceHWCounters, "sq_num_roe"}, {SourceHWCounters, "sq_num_tree"}, {SourceHWCounters, "sq_num_rree"},
	{SourceHWCounters, "rq_num_rnr"}, {SourceHWCounters, "sq_num_rnr"},
	{SourceHWCounters, "rq_num_oos"}, {SourceHWCounters, "sq_num_oos"},
	{SourceHWCounters, "rq_num_dup"}, {SourceHWCounters, "sq_num_to"},
	{SourceHWCounters, "num_cqovf"}, {SourceHWCounters, "rq_num_udsdprd"},
	// hw_counters of mlx5 kernels since 6.0 (optional counters, once enabled)
	{SourceHWCounters, "cc_rx_ce_pkts"}, {SourceHWCounters, "cc_rx_cnp_pkts"}, {SourceHWCounters, "cc_tx_cnp_pkts"},
	// hw_counters of mlx5 since kernel 6.11 (extended_err_cnts): the
	// requester's error completions for retries run out, by kind
	{SourceHWCounters, "req_transport_retries_exceeded"}, {SourceHWCounters, "req_rnr_retries_exceeded"},
}

type dictKey struct {
	src  Source
	name string
}

var dictIndex = func() map[dictKey]int {
	m := make(map[dictKey]int, len(counterDict))
	for i, c := range counterDict {
		k := dictKey{c.src, c.name}
		if _, dup := m[k]; dup {
			panic("schemas: counter " + c.name + " listed twice in counterDict")
		}
		m[k] = i
	}
	return m
}()
