-- Rollups for capacity planning: per port per minute and per hour, kept by
-- materialized views on every insert into port_samples. Aggregate states
-- (18.16 has no SimpleAggregateFunction): read them with sumMerge,
-- quantilesMerge(0.5, 0.95), maxMerge, anyLastMerge, or through the
-- port_minute_v / port_hour_v views. Baseline rows (no interval) are left
-- out: they carry no deltas. The views count every row inserted, so the
-- sink never inserts a sample port_samples already has (it checks the rows
-- of redelivered messages and of failed INSERTs first): the rollups equal
-- port_samples FINAL aggregated (internal/chdb/README.md).
-- Retention: day partitions (minute) and month partitions (hour), dropped by
-- `rdmawatch retention` on 18.16; TTL on newer servers (0008).
CREATE TABLE IF NOT EXISTS port_minute
(
    minute DateTime,
    node String,
    device String,
    port UInt16,
    link_layer AggregateFunction(anyLast, String),
    rate_gbps AggregateFunction(max, Float64),
    samples AggregateFunction(sum, UInt64),
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
    symbol_ber_max AggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(minute)
ORDER BY (node, device, port, minute);

CREATE MATERIALIZED VIEW IF NOT EXISTS port_minute_mv TO port_minute AS
SELECT
    toStartOfMinute(ts) AS minute,
    node,
    device,
    port,
    anyLastState(link_layer) AS link_layer,
    maxState(rate_gbps) AS rate_gbps,
    sumState(toUInt64(1)) AS samples,
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
    maxState(symbol_ber) AS symbol_ber_max
FROM port_samples
WHERE first = 0
GROUP BY node, device, port, minute;

CREATE TABLE IF NOT EXISTS port_hour
(
    hour DateTime,
    node String,
    device String,
    port UInt16,
    link_layer AggregateFunction(anyLast, String),
    rate_gbps AggregateFunction(max, Float64),
    samples AggregateFunction(sum, UInt64),
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
    symbol_ber_max AggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (node, device, port, hour);

CREATE MATERIALIZED VIEW IF NOT EXISTS port_hour_mv TO port_hour AS
SELECT
    toStartOfHour(ts) AS hour,
    node,
    device,
    port,
    anyLastState(link_layer) AS link_layer,
    maxState(rate_gbps) AS rate_gbps,
    sumState(toUInt64(1)) AS samples,
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
    maxState(symbol_ber) AS symbol_ber_max
FROM port_samples
WHERE first = 0
GROUP BY node, device, port, hour;
