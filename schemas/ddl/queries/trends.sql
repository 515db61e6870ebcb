-- question: How do congestion, loss, BER and load trend, for capacity planning? Per --bucket (hour, day or week; default day) and per --by group (leaf, from the loaded topology, unknown ports grouped by node-name prefix; node; or fabric; default leaf) over --from..--to, from the hour rollup (kept a year): ports, PFC pause seconds each way, ECN-marked packets, CNPs sent and handled, discards and out_of_buffer, pre-FEC BER worst and median over port-hours, and utilisation p50/p95 over port-hours (mean of the busier direction).
-- filters: --node limits the ports read. rack and spine are refused: topology format v1 names no racks, and a host port reaches every spine.
SELECT
    multiIf(@bucket = 'hour', hour, @bucket = 'week', toDateTime(toMonday(hour)), toStartOfDay(hour)) AS bucket,
    grp AS group,
    uniqExact(node, device, port) AS ports,
    round(sum(tx_pause_us) / 1e6, 3) AS tx_pause_s,
    round(sum(rx_pause_us) / 1e6, 3) AS rx_pause_s,
    sum(ecn) AS ecn_marked,
    sum(cnp_sent) AS cnp_sent,
    sum(cnp_handled) AS cnp_handled,
    sum(discards) AS discards,
    sum(oob) AS out_of_buffer,
    max(ber) AS pre_fec_ber_worst,
    quantileExact(0.5)(ber) AS pre_fec_ber_median,
    round(quantileExact(0.5)(util), 4) AS utilisation_p50,
    round(quantileExact(0.95)(util), 4) AS utilisation_p95
FROM
(
    SELECT
        hour,
        node,
        device,
        port,
        multiIf(@by = 'node', node, @by = 'fabric', 'fabric',
                any(leaf) = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'), any(leaf)) AS grp,
        sumMerge(tx_pause_duration_us) AS tx_pause_us,
        sumMerge(rx_pause_duration_us) AS rx_pause_us,
        sumMerge(np_ecn_marked_roce_packets) AS ecn,
        sumMerge(np_cnp_sent) AS cnp_sent,
        sumMerge(rp_cnp_handled) AS cnp_handled,
        sumMerge(port_xmit_discards) AS discards,
        sumMerge(out_of_buffer) AS oob,
        if(sumMerge(rx_bits_phy) > 0, sumMerge(rx_corrected_bits_phy) / sumMerge(rx_bits_phy), 0) AS ber,
        if(maxMerge(rate_gbps) * sumMerge(interval_ms) > 0,
           greatest(sumMerge(rcv_bytes), sumMerge(xmit_bytes)) * 8 / (maxMerge(rate_gbps) * 1e6 * sumMerge(interval_ms)), 0) AS util
    FROM
    (
        SELECT *
        FROM rollup_hour FINAL
        WHERE hour >= toStartOfHour(toDateTime(@from)) AND hour < toDateTime(@to)
          AND (@node = '' OR node = @node)
    ) AS hours
    ANY LEFT JOIN
    (
        SELECT node, device, port, switch AS leaf
        FROM topology_ports FINAL
        WHERE tier = 'leaf'
    ) AS leaves USING (node, device, port)
    GROUP BY hour, node, device, port
) AS port_hours
GROUP BY bucket, group
ORDER BY bucket, group
