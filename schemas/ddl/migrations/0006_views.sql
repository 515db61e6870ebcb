-- Views so nobody has to remember FINAL or argMax in the middle of a
-- postmortem.
-- events_latest: one row per incident with its latest state (highest
-- revision; redelivered copies of a revision change nothing), the first
-- detection time, and the evidence and affected ports of that state.
CREATE VIEW IF NOT EXISTS events_latest AS
SELECT
    type,
    id,
    max(rev) AS revision,
    argMax(state, rev) AS state,
    argMax(severity, rev) AS severity,
    argMax(scope, rev) AS scope,
    argMax(subject_node, rev) AS subject_node,
    argMax(subject_device, rev) AS subject_device,
    argMax(subject_port, rev) AS subject_port,
    argMax(start_ms, rev) AS start_ms,
    min(detected_at_ms) AS first_detected_at_ms,
    max(detected_at_ms) AS last_detected_at_ms,
    argMax(end_ms, rev) AS end_ms,
    argMax(start_ts, rev) AS start_ts,
    argMax(end_ts, rev) AS end_ts,
    argMax(layer, rev) AS layer,
    argMax(summary, rev) AS summary,
    argMax(evidence, rev) AS evidence,
    argMax(next_checks, rev) AS next_checks,
    argMax(has_origin, rev) AS has_origin,
    argMax(origin_node, rev) AS origin_node,
    argMax(origin_device, rev) AS origin_device,
    argMax(origin_port, rev) AS origin_port,
    argMax(origin_silent, rev) AS origin_silent,
    argMax(affected, rev) AS affected,
    argMax(affected_node, rev) AS affected_node,
    argMax(affected_device, rev) AS affected_device,
    argMax(affected_port, rev) AS affected_port,
    argMax(affected_first_seen_ms, rev) AS affected_first_seen_ms,
    argMax(affected_hops, rev) AS affected_hops,
    argMax(affected_pause_fraction, rev) AS affected_pause_fraction
FROM (SELECT *, revision AS rev FROM events)
GROUP BY type, id;

-- inventory_latest: every port as its node last described it.
CREATE VIEW IF NOT EXISTS inventory_latest AS
SELECT
    node,
    device,
    port,
    argMax(netdev, seen) AS netdev,
    argMax(link_layer, seen) AS link_layer,
    argMax(state, seen) AS state,
    argMax(rate, seen) AS rate,
    argMax(fw_ver, seen) AS fw_ver,
    argMax(board_id, seen) AS board_id,
    argMax(hca_type, seen) AS hca_type,
    argMax(node_guid, seen) AS node_guid,
    argMax(boot_id, seen) AS boot_id,
    max(last_seen) AS last_seen
FROM (SELECT *, last_seen_ms AS seen FROM inventory)
GROUP BY node, device, port;

-- port_minute_v: port_minute with its aggregate states merged, one row per port per minute.
CREATE VIEW IF NOT EXISTS port_minute_v AS
SELECT
    minute,
    node,
    device,
    port,
    anyLastMerge(link_layer) AS link_layer,
    maxMerge(rate_gbps) AS rate_gbps,
    sumMerge(samples) AS samples,
    sumMerge(interval_ms) AS interval_ms,
    sumMerge(rcv_bytes) AS rcv_bytes,
    sumMerge(xmit_bytes) AS xmit_bytes,
    if(interval_ms > 0, rcv_bytes * 8 / (interval_ms / 1000) / 1e9, 0) AS rcv_gbps_avg,
    if(interval_ms > 0, xmit_bytes * 8 / (interval_ms / 1000) / 1e9, 0) AS xmit_gbps_avg,
    quantilesMerge(0.5, 0.95)(utilisation_q) AS utilisation_p50_p95,
    maxMerge(utilisation_max) AS utilisation_max,
    sumMerge(tx_pause_duration_us) AS tx_pause_us,
    sumMerge(rx_pause_duration_us) AS rx_pause_us,
    maxMerge(tx_pause_fraction_max) AS tx_pause_fraction_max,
    maxMerge(rx_pause_fraction_max) AS rx_pause_fraction_max,
    sumMerge(symbol_error) AS symbol_errors,
    sumMerge(port_rcv_errors) AS rcv_errors,
    sumMerge(port_xmit_discards) AS xmit_discards,
    sumMerge(link_downed) AS link_downs,
    sumMerge(link_error_recovery) AS link_recoveries,
    sumMerge(out_of_sequence) AS out_of_sequence,
    sumMerge(local_ack_timeout_err) AS ack_timeouts,
    sumMerge(rx_bits_phy) AS rx_bits_phy,
    sumMerge(rx_corrected_bits_phy) AS rx_corrected_bits_phy,
    sumMerge(rx_pcs_symbol_err_phy) AS rx_pcs_symbol_err_phy,
    maxMerge(pre_fec_ber_max) AS pre_fec_ber_max,
    maxMerge(symbol_ber_max) AS symbol_ber_max,
    sumMerge(np_ecn_marked_roce_packets) AS ecn_marked,
    sumMerge(np_cnp_sent) AS cnp_sent,
    sumMerge(rp_cnp_handled) AS cnp_handled,
    sumMerge(rp_cnp_ignored) AS cnp_ignored
FROM port_minute
GROUP BY node, device, port, minute;

-- port_hour_v: port_hour with its aggregate states merged, one row per port per hour.
CREATE VIEW IF NOT EXISTS port_hour_v AS
SELECT
    hour,
    node,
    device,
    port,
    anyLastMerge(link_layer) AS link_layer,
    maxMerge(rate_gbps) AS rate_gbps,
    sumMerge(samples) AS samples,
    sumMerge(interval_ms) AS interval_ms,
    sumMerge(rcv_bytes) AS rcv_bytes,
    sumMerge(xmit_bytes) AS xmit_bytes,
    if(interval_ms > 0, rcv_bytes * 8 / (interval_ms / 1000) / 1e9, 0) AS rcv_gbps_avg,
    if(interval_ms > 0, xmit_bytes * 8 / (interval_ms / 1000) / 1e9, 0) AS xmit_gbps_avg,
    quantilesMerge(0.5, 0.95)(utilisation_q) AS utilisation_p50_p95,
    maxMerge(utilisation_max) AS utilisation_max,
    sumMerge(tx_pause_duration_us) AS tx_pause_us,
    sumMerge(rx_pause_duration_us) AS rx_pause_us,
    maxMerge(tx_pause_fraction_max) AS tx_pause_fraction_max,
    maxMerge(rx_pause_fraction_max) AS rx_pause_fraction_max,
    sumMerge(symbol_error) AS symbol_errors,
    sumMerge(port_rcv_errors) AS rcv_errors,
    sumMerge(port_xmit_discards) AS xmit_discards,
    sumMerge(link_downed) AS link_downs,
    sumMerge(link_error_recovery) AS link_recoveries,
    sumMerge(out_of_sequence) AS out_of_sequence,
    sumMerge(local_ack_timeout_err) AS ack_timeouts,
    sumMerge(rx_bits_phy) AS rx_bits_phy,
    sumMerge(rx_corrected_bits_phy) AS rx_corrected_bits_phy,
    sumMerge(rx_pcs_symbol_err_phy) AS rx_pcs_symbol_err_phy,
    maxMerge(pre_fec_ber_max) AS pre_fec_ber_max,
    maxMerge(symbol_ber_max) AS symbol_ber_max,
    sumMerge(np_ecn_marked_roce_packets) AS ecn_marked,
    sumMerge(np_cnp_sent) AS cnp_sent,
    sumMerge(rp_cnp_handled) AS cnp_handled,
    sumMerge(rp_cnp_ignored) AS cnp_ignored
FROM port_hour
GROUP BY node, device, port, hour;
