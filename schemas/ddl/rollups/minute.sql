-- Roll the minutes of [@from, @to) (unix seconds) from port_samples into
-- rollup_minute: one row per port per minute. Baselines (first = 1) carry no
-- deltas and are left out. Run again, the newer roll replaces (0012).
-- No FINAL: it tripled the roll's cost (roll-without-final in BENCHMARKS.md), and the
-- sink never inserts a sample the table already holds.
INSERT INTO rollup_minute
SELECT
    toStartOfMinute(ts) AS minute,
    node,
    device,
    port,
    anyLastState(link_layer) AS link_layer,
    maxState(rate_gbps) AS rate_gbps,
    count() AS samples,
    sumState(interval_ms) AS interval_ms,
    sumState(rcv_bytes) AS rcv_bytes,
    sumState(xmit_bytes) AS xmit_bytes,
    sumState(rcv_packets) AS rcv_packets,
    sumState(xmit_packets) AS xmit_packets,
    sumState(symbol_error) AS symbol_error,
    sumState(link_error_recovery) AS link_error_recovery,
    sumState(link_downed) AS link_downed,
    sumState(port_rcv_errors) AS port_rcv_errors,
    sumState(port_xmit_discards) AS port_xmit_discards,
    sumState(port_xmit_wait) AS port_xmit_wait,
    sumState(out_of_buffer) AS out_of_buffer,
    sumState(out_of_sequence) AS out_of_sequence,
    sumState(local_ack_timeout_err) AS local_ack_timeout_err,
    sumState(rx_bits_phy) AS rx_bits_phy,
    sumState(rx_corrected_bits_phy) AS rx_corrected_bits_phy,
    sumState(rx_pcs_symbol_err_phy) AS rx_pcs_symbol_err_phy,
    sumState(link_down_events_phy) AS link_down_events_phy,
    sumState(np_ecn_marked_roce_packets) AS np_ecn_marked_roce_packets,
    sumState(np_cnp_sent) AS np_cnp_sent,
    sumState(rp_cnp_handled) AS rp_cnp_handled,
    sumState(rp_cnp_ignored) AS rp_cnp_ignored,
    sumState(rx_pause_duration_us) AS rx_pause_duration_us,
    sumState(tx_pause_duration_us) AS tx_pause_duration_us,
    quantilesState(0.5, 0.95)(utilisation) AS utilisation_q,
    maxState(utilisation) AS utilisation_max,
    maxState(tx_pause_fraction) AS tx_pause_fraction_max,
    maxState(rx_pause_fraction) AS rx_pause_fraction_max,
    maxState(pre_fec_ber) AS pre_fec_ber_max,
    maxState(symbol_ber) AS symbol_ber_max,
    now() AS rolled_at
FROM port_samples
WHERE first = 0 AND ts >= toDateTime(@from) AND ts < toDateTime(@to)
GROUP BY node, device, port, minute
