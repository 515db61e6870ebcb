-- question: How do congestion, loss, BER, load and incidents trend, for capacity planning? Per --bucket (hour, day or week; default day) and per --by group (leaf, from the loaded topology, unknown ports grouped by node-name prefix; rack, from the topology's "racks", a node in no rack grouped by its leaf; node; or fabric; default leaf) over --from..--to, from the hour rollup (kept two years by default): ports, PFC pause seconds each way, ECN-marked packets, CNPs sent and handled, discards and out_of_buffer, pre- and post-FEC BER worst and median over port-hours, utilisation p50/p95 over port-hours (mean of the busier direction), and the incidents that started in the bucket, in all and by type ("pfc_storm:2,ber_drift:1").
-- filters: --node limits the ports and incidents read. A port-scope incident counts in its port's group, a node-scope one in its node's (first leaf's) group, a fabric-scope one in the group "fabric". spine is refused: every leaf uplinks to every spine, so a spine's group would be the whole fabric again.
SELECT
    bucket,
    grp AS group,
    uniqExactIf(node, device, port, kind = 1) AS ports,
    round(sum(tx_pause_us) / 1e6, 3) AS tx_pause_s,
    round(sum(rx_pause_us) / 1e6, 3) AS rx_pause_s,
    sum(ecn) AS ecn_marked,
    sum(cnp_sent) AS cnp_sent,
    sum(cnp_handled) AS cnp_handled,
    sum(discards) AS discards,
    sum(oob) AS out_of_buffer,
    max(ber) AS pre_fec_ber_worst,
    if(countIf(kind = 1) = 0, 0, quantileExactIf(0.5)(ber, kind = 1)) AS pre_fec_ber_median,
    max(post_ber) AS post_fec_ber_worst,
    if(countIf(kind = 1) = 0, 0, quantileExactIf(0.5)(post_ber, kind = 1)) AS post_fec_ber_median,
    round(if(countIf(kind = 1) = 0, 0, quantileExactIf(0.5)(util, kind = 1)), 4) AS utilisation_p50,
    round(if(countIf(kind = 1) = 0, 0, quantileExactIf(0.95)(util, kind = 1)), 4) AS utilisation_p95,
    sum(incidents) AS incidents,
    arrayStringConcat(arraySort(groupArrayIf(type_count, type_count != '')), ',') AS incidents_by_type
FROM
(
    -- The port-hours (kind 1) and the incidents (kind 0), one UNION ALL
    -- rather than a FULL JOIN: 18.16 fills a right-only row's USING keys
    -- with defaults, which would lose a bucket holding only incidents.
    SELECT
        toUInt8(1) AS kind,
        multiIf(@bucket = 'hour', hour, @bucket = 'week', toDateTime(toMonday(hour)), toStartOfDay(hour)) AS bucket,
        grp, node, device, port,
        tx_pause_us, rx_pause_us, ecn, cnp_sent, cnp_handled, discards, oob, ber, post_ber, util,
        toUInt64(0) AS incidents,
        '' AS type_count
    FROM
    (
        -- FINAL leaves one row per port-hour (the sorting key), so each
        -- state is finalised on its row: no GROUP BY over a year of
        -- port-hours (finalizeAggregation made a 30-day read of 10 000
        -- ports 5 times faster on 18.16 than sumMerge ... GROUP BY).
        SELECT
            hour,
            node,
            device,
            port,
            multiIf(@by = 'node', node, @by = 'fabric', 'fabric',
                    @by = 'rack' AND rack != '', rack,
                    leaf = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'), leaf) AS grp,
            finalizeAggregation(tx_pause_duration_us) AS tx_pause_us,
            finalizeAggregation(rx_pause_duration_us) AS rx_pause_us,
            finalizeAggregation(np_ecn_marked_roce_packets) AS ecn,
            finalizeAggregation(np_cnp_sent) AS cnp_sent,
            finalizeAggregation(rp_cnp_handled) AS cnp_handled,
            finalizeAggregation(port_xmit_discards) AS discards,
            finalizeAggregation(out_of_buffer) AS oob,
            finalizeAggregation(rx_bits_phy) AS phy_bits,
            if(phy_bits > 0, finalizeAggregation(rx_corrected_bits_phy) / phy_bits, 0) AS ber,
            -- Post-FEC: the PCS symbol errors FEC left over the PHY bits,
            -- as schemas.ErrorRatio computes it per sample.
            if(phy_bits > 0, finalizeAggregation(rx_pcs_symbol_err_phy) / phy_bits, 0) AS post_ber,
            finalizeAggregation(rate_gbps) * finalizeAggregation(interval_ms) AS capacity,
            if(capacity > 0,
               greatest(finalizeAggregation(rcv_bytes), finalizeAggregation(xmit_bytes)) * 8 / (capacity * 1e6), 0) AS util
        FROM
        (
            SELECT *
            FROM rollup_hour FINAL
            WHERE hour >= toStartOfHour(toDateTime(@from)) AND hour < toDateTime(@to)
              AND (@node = '' OR node = @node)
        ) AS hours
        ANY LEFT JOIN
        (
            SELECT node, device, port, switch AS leaf, rack
            FROM topology_ports FINAL
            WHERE tier = 'leaf'
        ) AS leaves USING (node, device, port)
    ) AS port_hours
    UNION ALL
    SELECT
        toUInt8(0) AS kind,
        bucket,
        grp,
        '' AS node,
        '' AS device,
        toUInt16(0) AS port,
        toUInt64(0) AS tx_pause_us,
        toUInt64(0) AS rx_pause_us,
        toUInt64(0) AS ecn,
        toUInt64(0) AS cnp_sent,
        toUInt64(0) AS cnp_handled,
        toUInt64(0) AS discards,
        toUInt64(0) AS oob,
        toFloat64(0) AS ber,
        toFloat64(0) AS post_ber,
        toFloat64(0) AS util,
        toUInt64(count()) AS incidents,
        concat(type, ':', toString(count())) AS type_count
    FROM
    (
        SELECT
            type,
            multiIf(@bucket = 'hour', toStartOfHour(start_ts), @bucket = 'week', toDateTime(toMonday(start_ts)), toStartOfDay(start_ts)) AS bucket,
            multiIf(node = '', 'fabric', @by = 'node', node, @by = 'fabric', 'fabric',
                    @by = 'rack' AND if(rack != '', rack, node_rack) != '', if(rack != '', rack, node_rack),
                    if(leaf != '', leaf, node_leaf) = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'),
                    if(leaf != '', leaf, node_leaf)) AS grp
        FROM
        (
            SELECT *
            FROM
            (
                SELECT type, start_ts, subject_node AS node, subject_device AS device, subject_port AS port
                FROM events_latest
                WHERE start_ts >= toDateTime(@from) AND start_ts < toDateTime(@to)
                  AND (@node = '' OR subject_node = @node)
            ) AS incidents
            ANY LEFT JOIN
            (
                SELECT node, device, port, switch AS leaf, rack
                FROM topology_ports FINAL
                WHERE tier = 'leaf'
            ) AS port_leaves USING (node, device, port)
        ) AS with_port
        ANY LEFT JOIN
        (
            -- A node-scope incident names no port: its node's first leaf.
            SELECT node, min(switch) AS node_leaf, max(rack) AS node_rack
            FROM topology_ports FINAL
            WHERE tier = 'leaf'
            GROUP BY node
        ) AS node_leaves USING (node)
    ) AS started
    GROUP BY bucket, grp, type
) AS rows
GROUP BY bucket, group
ORDER BY bucket, group
