-- Roll the days of [@from, @to) (unix seconds, widened to whole days of
-- the server's time zone) from rollup_hour into rollup_day: the hours'
-- states merged, and each port-hour's BER and utilisation kept as exact
-- quantile states (0017) and as histogram bin keys (0019, which explains
-- the bins; trends.sql reads them). Run again, the newer roll replaces.
-- The columns are named, so a column a later migration adds does not break
-- this statement (it takes the column's default).
INSERT INTO rollup_day (day, node, device, port, link_layer, rate_gbps, samples, interval_ms,
    rcv_bytes, xmit_bytes, rcv_packets, xmit_packets, symbol_error, link_error_recovery, link_downed,
    port_rcv_errors, port_xmit_discards, port_xmit_wait, out_of_buffer, out_of_sequence,
    local_ack_timeout_err, rx_bits_phy, rx_corrected_bits_phy, rx_pcs_symbol_err_phy,
    link_down_events_phy, np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, rp_cnp_ignored,
    rx_pause_duration_us, tx_pause_duration_us, utilisation_q, utilisation_max,
    tx_pause_fraction_max, rx_pause_fraction_max, pre_fec_ber_max, symbol_ber_max,
    hour_pre_fec_ber_max, hour_pre_fec_ber_q, hour_post_fec_ber_max, hour_post_fec_ber_q,
    hour_utilisation_q, hour_utilisation_bins, hour_pre_fec_ber_bins, hour_post_fec_ber_bins,
    hours, rolled_at)
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
    quantilesExactState(0.5, 0.95)(util_key) AS hour_utilisation_bins,
    quantileExactState(0.5)(ber_key) AS hour_pre_fec_ber_bins,
    quantileExactState(0.5)(post_ber_key) AS hour_post_fec_ber_bins,
    toUInt16(count()) AS hours,
    now() AS rolled_at
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
           greatest(finalizeAggregation(rcv_bytes), finalizeAggregation(xmit_bytes)) * 8 / (capacity * 1e6), 0) AS util,
        -- The bin keys of 0019 (trends.sql's partial days compute the
        -- same).
        toUInt8(least(round(util * 200), 255)) AS util_key,
        if(ber > 0, toInt16(round(log10(ber) * 20)), toInt16(-32768)) AS ber_key,
        if(post_ber > 0, toInt16(round(log10(post_ber) * 20)), toInt16(-32768)) AS post_ber_key
    FROM rollup_hour FINAL
    -- Whole days of the server's time zone, whatever @from and @to: a roll
    -- of part of a day would replace the day's row with that part.
    WHERE hour >= toStartOfDay(toDateTime(@from)) AND hour < toDateTime(toDate(toDateTime(@to - 1)) + 1)
) AS hours
GROUP BY node, device, port, day
