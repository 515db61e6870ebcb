-- The day rollup (issue: trends by day and week over a year from the
-- hour rollup took 34.5 s for 2 000 ports on 18.16, BENCHMARKS.md figure 7).
-- One row per port per server-time-zone day, rolled from rollup_hour FINAL
-- by the sink after it rolls an hour of that day, and by `rdmawatch rollup`
-- (schemas/ddl/rollups/day.sql). Rolling a day again writes the whole day
-- again and ReplacingMergeTree(rolled_at) keeps the newest: read it with
-- FINAL. The columns are rollup_hour's states merged over the day, plus the
-- per-port-hour figures `query trends` takes its worst and median of
-- (hour_*: the BER and utilisation of each port-hour, as exact quantile
-- states so that a day or week merged from them answers as the port-hours
-- did). Partitioned by month like rollup_hour, so `rdmawatch retention`
-- drops it on 18.16; TTL for newer servers is in 0018.
CREATE TABLE IF NOT EXISTS rollup_day
(

    day Date,
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
    hour_pre_fec_ber_max AggregateFunction(max, Float64),
    hour_pre_fec_ber_q AggregateFunction(quantileExact(0.5), Float64),
    hour_post_fec_ber_max AggregateFunction(max, Float64),
    hour_post_fec_ber_q AggregateFunction(quantileExact(0.5), Float64),
    hour_utilisation_q AggregateFunction(quantilesExact(0.5, 0.95), Float64),
    rolled_at DateTime
)
ENGINE = ReplacingMergeTree(rolled_at)
PARTITION BY toYYYYMM(day)
ORDER BY (node, device, port, day);

-- Every day the hour rollup already holds, as the roll would write it
-- (rolled_at 0: any later roll of the day replaces the copy). Run again,
-- the second copy replaces the first. The columns are named so the
-- statement still runs, as a migration cut short or a second migrator runs
-- it again, once 0019 has added columns.
INSERT INTO rollup_day (day, node, device, port, link_layer, rate_gbps, samples, interval_ms,
    rcv_bytes, xmit_bytes, rcv_packets, xmit_packets, symbol_error, link_error_recovery, link_downed,
    port_rcv_errors, port_xmit_discards, port_xmit_wait, out_of_buffer, out_of_sequence,
    local_ack_timeout_err, rx_bits_phy, rx_corrected_bits_phy, rx_pcs_symbol_err_phy,
    link_down_events_phy, np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, rp_cnp_ignored,
    rx_pause_duration_us, tx_pause_duration_us, utilisation_q, utilisation_max,
    tx_pause_fraction_max, rx_pause_fraction_max, pre_fec_ber_max, symbol_ber_max,
    hour_pre_fec_ber_max, hour_pre_fec_ber_q, hour_post_fec_ber_max, hour_post_fec_ber_q,
    hour_utilisation_q, rolled_at)
SELECT
    toDate(hour) AS day,
    node,
    device,
    port,
    anyLastMergeState(link_layer) AS link_layer,
    maxMergeState(rate_gbps) AS rate_gbps,
    sum(samples) AS samples,
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
    maxState(ber) AS hour_pre_fec_ber_max,
    quantileExactState(0.5)(ber) AS hour_pre_fec_ber_q,
    maxState(post_ber) AS hour_post_fec_ber_max,
    quantileExactState(0.5)(post_ber) AS hour_post_fec_ber_q,
    quantilesExactState(0.5, 0.95)(util) AS hour_utilisation_q,
    toDateTime(0) AS rolled_at
FROM
(
    -- Each port-hour's BER and utilisation, computed as trends.sql's hour
    -- bucket computes them, so a day's worst and median are the port-hours'.
    SELECT
        *,
        finalizeAggregation(rx_bits_phy) AS phy_bits,
        if(phy_bits > 0, finalizeAggregation(rx_corrected_bits_phy) / phy_bits, 0) AS ber,
        if(phy_bits > 0, finalizeAggregation(rx_pcs_symbol_err_phy) / phy_bits, 0) AS post_ber,
        finalizeAggregation(rate_gbps) * finalizeAggregation(interval_ms) AS capacity,
        if(capacity > 0,
           greatest(finalizeAggregation(rcv_bytes), finalizeAggregation(xmit_bytes)) * 8 / (capacity * 1e6), 0) AS util
    FROM rollup_hour FINAL
) AS hours
GROUP BY node, device, port, day;
