-- Rollups computed from the stored rows instead of on every insert (issue 13).
-- The materialized views of 0005 aggregated each INSERT block as it came:
-- 74 % of ClickHouse's CPU under sustained inserts (BENCHMARKS.md section 12).
-- Now the sink rolls each closed minute with one INSERT ... SELECT over
-- port_samples, and each closed hour from the minutes
-- (schemas/ddl/rollups, sink/rollup.go). Rolling a minute again (late rows,
-- a restarted sink, two sinks) writes its rows again, and
-- ReplacingMergeTree(rolled_at) keeps the newest roll: read these tables
-- with FINAL or through port_minute_v / port_hour_v. A roll reads
-- port_samples without FINAL (FINAL made it 3 times as costly): the sink
-- never inserts a sample port_samples already holds (sink/README.md).
-- port_minute and port_hour are copied here (rolled_at 0: any later roll of
-- the same minute replaces the copy) and no longer written; they keep their
-- data until retention drops it, or an admin drops the tables. Every
-- statement can run again: a second copy of a key replaces the first.
DROP TABLE IF EXISTS port_minute_mv;

DROP TABLE IF EXISTS port_hour_mv;

CREATE TABLE IF NOT EXISTS rollup_minute
(
    minute DateTime,
    node String,
    device String,
    port UInt16,
    link_layer AggregateFunction(anyLast, String),
    rate_gbps AggregateFunction(max, Float64),
    samples UInt64,
    interval_ms AggregateFunction(sum, Int64),
    rcv_bytes AggregateFunction(sum, UInt64),
    xmit_bytes AggregateFunction(sum, UInt64),
    rcv_packets AggregateFunction(sum, UInt64),
    xmit_packets AggregateFunction(sum, UInt64),
    symbol_error AggregateFunction(sum, UInt64),
    link_error_recovery AggregateFunction(sum, UInt64),
    link_downed AggregateFunction(sum, UInt64),
    port_rcv_errors AggregateFunction(sum, UInt64),
    port_xmit_discards AggregateFunction(sum, UInt64),
    port_xmit_wait AggregateFunction(sum, UInt64),
    out_of_buffer AggregateFunction(sum, UInt64),
    out_of_sequence AggregateFunction(sum, UInt64),
    local_ack_timeout_err AggregateFunction(sum, UInt64),
    rx_bits_phy AggregateFunction(sum, UInt64),
    rx_corrected_bits_phy AggregateFunction(sum, UInt64),
    rx_pcs_symbol_err_phy AggregateFunction(sum, UInt64),
    link_down_events_phy AggregateFunction(sum, UInt64),
    np_ecn_marked_roce_packets AggregateFunction(sum, UInt64),
    np_cnp_sent AggregateFunction(sum, UInt64),
    rp_cnp_handled AggregateFunction(sum, UInt64),
    rp_cnp_ignored AggregateFunction(sum, UInt64),
    rx_pause_duration_us AggregateFunction(sum, UInt64),
    tx_pause_duration_us AggregateFunction(sum, UInt64),
    utilisation_q AggregateFunction(quantiles(0.5, 0.95), Float64),
    utilisation_max AggregateFunction(max, Float64),
    tx_pause_fraction_max AggregateFunction(max, Float64),
    rx_pause_fraction_max AggregateFunction(max, Float64),
    pre_fec_ber_max AggregateFunction(max, Float64),
    symbol_ber_max AggregateFunction(max, Float64),
    rolled_at DateTime
)
ENGINE = ReplacingMergeTree(rolled_at)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (node, device, port, minute);

CREATE TABLE IF NOT EXISTS rollup_hour
(
    hour DateTime,
    node String,
    device String,
    port UInt16,
    link_layer AggregateFunction(anyLast, String),
    rate_gbps AggregateFunction(max, Float64),
    samples UInt64,
    interval_ms AggregateFunction(sum, Int64),
    rcv_bytes AggregateFunction(sum, UInt64),
    xmit_bytes AggregateFunction(sum, UInt64),
    rcv_packets AggregateFunction(sum, UInt64),
    xmit_packets AggregateFunction(sum, UInt64),
    symbol_error AggregateFunction(sum, UInt64),
    link_error_recovery AggregateFunction(sum, UInt64),
    link_downed AggregateFunction(sum, UInt64),
    port_rcv_errors AggregateFunction(sum, UInt64),
    port_xmit_discards AggregateFunction(sum, UInt64),
    port_xmit_wait AggregateFunction(sum, UInt64),
    out_of_buffer AggregateFunction(sum, UInt64),
    out_of_sequence AggregateFunction(sum, UInt64),
    local_ack_timeout_err AggregateFunction(sum, UInt64),
    rx_bits_phy AggregateFunction(sum, UInt64),
    rx_corrected_bits_phy AggregateFunction(sum, UInt64),
    rx_pcs_symbol_err_phy AggregateFunction(sum, UInt64),
    link_down_events_phy AggregateFunction(sum, UInt64),
    np_ecn_marked_roce_packets AggregateFunction(sum, UInt64),
    np_cnp_sent AggregateFunction(sum, UInt64),
    rp_cnp_handled AggregateFunction(sum, UInt64),
    rp_cnp_ignored AggregateFunction(sum, UInt64),
    rx_pause_duration_us AggregateFunction(sum, UInt64),
    tx_pause_duration_us AggregateFunction(sum, UInt64),
    utilisation_q AggregateFunction(quantiles(0.5, 0.95), Float64),
    utilisation_max AggregateFunction(max, Float64),
    tx_pause_fraction_max AggregateFunction(max, Float64),
    rx_pause_fraction_max AggregateFunction(max, Float64),
    pre_fec_ber_max AggregateFunction(max, Float64),
    symbol_ber_max AggregateFunction(max, Float64),
    rolled_at DateTime
)
ENGINE = ReplacingMergeTree(rolled_at)
PARTITION BY toYYYYMM(hour)
ORDER BY (node, device, port, hour);

INSERT INTO rollup_minute
SELECT
    minute,
    node,
    device,
    port,
    anyLastMergeState(link_layer) AS link_layer,
    maxMergeState(rate_gbps) AS rate_gbps,
    sumMerge(samples) AS samples,
    sumMergeState(interval_ms) AS interval_ms,
    sumMergeState(rcv_bytes) AS rcv_bytes,
    sumMergeState(xmit_bytes) AS xmit_bytes,
    sumMergeState(rcv_packets) AS rcv_packets,
    sumMergeState(xmit_packets) AS xmit_packets,
    sumMergeState(symbol_error) AS symbol_error,
    sumMergeState(link_error_recovery) AS link_error_recovery,
    sumMergeState(link_downed) AS link_downed,
    sumMergeState(port_rcv_errors) AS port_rcv_errors,
    sumMergeState(port_xmit_discards) AS port_xmit_discards,
    sumMergeState(port_xmit_wait) AS port_xmit_wait,
    sumMergeState(out_of_buffer) AS out_of_buffer,
    sumMergeState(out_of_sequence) AS out_of_sequence,
    sumMergeState(local_ack_timeout_err) AS local_ack_timeout_err,
    sumMergeState(rx_bits_phy) AS rx_bits_phy,
    sumMergeState(rx_corrected_bits_phy) AS rx_corrected_bits_phy,
    sumMergeState(rx_pcs_symbol_err_phy) AS rx_pcs_symbol_err_phy,
    sumMergeState(link_down_events_phy) AS link_down_events_phy,
    sumMergeState(np_ecn_marked_roce_packets) AS np_ecn_marked_roce_packets,
    sumMergeState(np_cnp_sent) AS np_cnp_sent,
    sumMergeState(rp_cnp_handled) AS rp_cnp_handled,
    sumMergeState(rp_cnp_ignored) AS rp_cnp_ignored,
    sumMergeState(rx_pause_duration_us) AS rx_pause_duration_us,
    sumMergeState(tx_pause_duration_us) AS tx_pause_duration_us,
    quantilesMergeState(0.5, 0.95)(utilisation_q) AS utilisation_q,
    maxMergeState(utilisation_max) AS utilisation_max,
    maxMergeState(tx_pause_fraction_max) AS tx_pause_fraction_max,
    maxMergeState(rx_pause_fraction_max) AS rx_pause_fraction_max,
    maxMergeState(pre_fec_ber_max) AS pre_fec_ber_max,
    maxMergeState(symbol_ber_max) AS symbol_ber_max,
    toDateTime(0) AS rolled_at
FROM port_minute
GROUP BY node, device, port, minute;

INSERT INTO rollup_hour
SELECT
    hour,
    node,
    device,
    port,
    anyLastMergeState(link_layer) AS link_layer,
    maxMergeState(rate_gbps) AS rate_gbps,
    sumMerge(samples) AS samples,
    sumMergeState(interval_ms) AS interval_ms,
    sumMergeState(rcv_bytes) AS rcv_bytes,
    sumMergeState(xmit_bytes) AS xmit_bytes,
    sumMergeState(rcv_packets) AS rcv_packets,
    sumMergeState(xmit_packets) AS xmit_packets,
    sumMergeState(symbol_error) AS symbol_error,
    sumMergeState(link_error_recovery) AS link_error_recovery,
    sumMergeState(link_downed) AS link_downed,
    sumMergeState(port_rcv_errors) AS port_rcv_errors,
    sumMergeState(port_xmit_discards) AS port_xmit_discards,
    sumMergeState(port_xmit_wait) AS port_xmit_wait,
    sumMergeState(out_of_buffer) AS out_of_buffer,
    sumMergeState(out_of_sequence) AS out_of_sequence,
    sumMergeState(local_ack_timeout_err) AS local_ack_timeout_err,
    sumMergeState(rx_bits_phy) AS rx_bits_phy,
    sumMergeState(rx_corrected_bits_phy) AS rx_corrected_bits_phy,
    sumMergeState(rx_pcs_symbol_err_phy) AS rx_pcs_symbol_err_phy,
    sumMergeState(link_down_events_phy) AS link_down_events_phy,
    sumMergeState(np_ecn_marked_roce_packets) AS np_ecn_marked_roce_packets,
    sumMergeState(np_cnp_sent) AS np_cnp_sent,
    sumMergeState(rp_cnp_handled) AS rp_cnp_handled,
    sumMergeState(rp_cnp_ignored) AS rp_cnp_ignored,
    sumMergeState(rx_pause_duration_us) AS rx_pause_duration_us,
    sumMergeState(tx_pause_duration_us) AS tx_pause_duration_us,
    quantilesMergeState(0.5, 0.95)(utilisation_q) AS utilisation_q,
    maxMergeState(utilisation_max) AS utilisation_max,
    maxMergeState(tx_pause_fraction_max) AS tx_pause_fraction_max,
    maxMergeState(rx_pause_fraction_max) AS rx_pause_fraction_max,
    maxMergeState(pre_fec_ber_max) AS pre_fec_ber_max,
    maxMergeState(symbol_ber_max) AS symbol_ber_max,
    toDateTime(0) AS rolled_at
FROM port_hour
GROUP BY node, device, port, hour;

DROP TABLE IF EXISTS port_minute_v;

CREATE VIEW IF NOT EXISTS port_minute_v AS
SELECT
    minute,
    node,
    device,
    port,
    anyLastMerge(link_layer) AS link_layer,
    maxMerge(rate_gbps) AS rate_gbps,
    sum(samples) AS samples,
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
FROM rollup_minute FINAL
GROUP BY node, device, port, minute;

DROP TABLE IF EXISTS port_hour_v;

CREATE VIEW IF NOT EXISTS port_hour_v AS
SELECT
    hour,
    node,
    device,
    port,
    anyLastMerge(link_layer) AS link_layer,
    maxMerge(rate_gbps) AS rate_gbps,
    sum(samples) AS samples,
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
FROM rollup_hour FINAL
GROUP BY node, device, port, hour;
