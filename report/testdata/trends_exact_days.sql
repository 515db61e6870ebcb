-- The trends query as it was before migration 0019 (a9218fc): day and week
-- buckets merge the exact quantile states of rollup_day (hour_*_q, which
-- schemas/ddl/rollups/day.sql still writes). BenchmarkTrends times it next
-- to the shipped query, which takes the quantiles from the histograms, on
-- the same rows; the tests compare the two answers.
-- question: How do congestion, loss, BER, load and incidents trend, for capacity planning? Per --bucket (hour, day or week; default day) and per --by group (leaf, from the loaded topology, unknown ports grouped by node-name prefix; rack, from the topology's "racks", a node in no rack grouped by its leaf; node; or fabric; default leaf) over --from..--to, from the day rollup for --bucket day and week (kept five years by default; the hour rollup for the hours of a partial first or last day) and the hour rollup for --bucket hour (kept two years): ports, PFC pause seconds each way, ECN-marked packets, CNPs sent and handled, discards and out_of_buffer, pre- and post-FEC BER worst and median over port-hours, utilisation p50/p95 over port-hours (mean of the busier direction), and the incidents that started in the bucket, in all and by type ("pfc_storm:2,ber_drift:1").
-- filters: --node limits the ports and incidents read. A port-scope incident counts in its port's group, a node-scope one in its node's (first leaf's) group, a fabric-scope one in the group "fabric". spine is refused: every leaf uplinks to every spine, so a spine's group would be the whole fabric again.
SELECT
    bucket,
    grp AS group,
    sum(ports) AS ports,
    round(sum(tx_pause_us) / 1e6, 3) AS tx_pause_s,
    round(sum(rx_pause_us) / 1e6, 3) AS rx_pause_s,
    sum(ecn) AS ecn_marked,
    sum(cnp_sent) AS cnp_sent,
    sum(cnp_handled) AS cnp_handled,
    sum(discards) AS discards,
    sum(oob) AS out_of_buffer,
    max(ber_worst) AS pre_fec_ber_worst,
    sum(ber_median) AS pre_fec_ber_median,
    max(post_ber_worst) AS post_fec_ber_worst,
    sum(post_ber_median) AS post_fec_ber_median,
    round(sum(util_p50), 4) AS utilisation_p50,
    round(sum(util_p95), 4) AS utilisation_p95,
    sum(incidents) AS incidents,
    arrayStringConcat(arraySort(groupArrayIf(type_count, type_count != '')), ',') AS incidents_by_type
FROM
(
    -- One row per bucket and group from the ports (the hour rollup for
    -- --bucket hour, the day rollup otherwise: only one of the two reads
    -- rows, the other's range is empty) and one per bucket, group and type
    -- from the incidents. A bucket's figures come from exactly one port
    -- row, so the sums above finalise them; UNION ALL rather than a FULL
    -- JOIN: 18.16 fills a right-only row's USING keys with defaults, which
    -- would lose a bucket holding only incidents.
    SELECT
        hour AS bucket,
        grp,
        uniqExact(node, device, port) AS ports,
        sum(tx_pause_us) AS tx_pause_us,
        sum(rx_pause_us) AS rx_pause_us,
        sum(ecn) AS ecn,
        sum(cnp_sent) AS cnp_sent,
        sum(cnp_handled) AS cnp_handled,
        sum(discards) AS discards,
        sum(oob) AS oob,
        max(ber) AS ber_worst,
        quantileExact(0.5)(ber) AS ber_median,
        max(post_ber) AS post_ber_worst,
        quantileExact(0.5)(post_ber) AS post_ber_median,
        quantileExact(0.5)(util) AS util_p50,
        quantileExact(0.95)(util) AS util_p95,
        toUInt64(0) AS incidents,
        '' AS type_count
    FROM
    (
        -- FINAL leaves one row per port-hour (the sorting key), so each
        -- state is finalised on its row: no GROUP BY over the port-hours
        -- (finalizeAggregation made a 30-day read of 10 000 ports 5 times
        -- faster on 18.16 than sumMerge ... GROUP BY).
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
            -- Empty unless --bucket hour: the bound is a constant, so
            -- the primary key skips the table.
            WHERE hour >= toStartOfHour(toDateTime(@from))
              AND hour < if(@bucket = 'hour', toDateTime(@to), toDateTime(0))
              AND (@node = '' OR node = @node)
        ) AS hours
        ANY LEFT JOIN
        (
            SELECT node, device, port, switch AS leaf, rack
            FROM topology_ports FINAL
            WHERE tier = 'leaf'
        ) AS leaves USING (node, device, port)
    ) AS port_hours
    GROUP BY bucket, grp
    UNION ALL
    SELECT
        multiIf(@bucket = 'week', toDateTime(toMonday(day)), toDateTime(day)) AS bucket,
        grp,
        uniqExact(node, device, port) AS ports,
        sum(tx_pause_us) AS tx_pause_us,
        sum(rx_pause_us) AS rx_pause_us,
        sum(ecn) AS ecn,
        sum(cnp_sent) AS cnp_sent,
        sum(cnp_handled) AS cnp_handled,
        sum(discards) AS discards,
        sum(oob) AS oob,
        max(ber_max) AS ber_worst,
        quantileExactMerge(0.5)(ber_q) AS ber_median,
        max(post_ber_max) AS post_ber_worst,
        quantileExactMerge(0.5)(post_ber_q) AS post_ber_median,
        quantilesExactMerge(0.5, 0.95)(util_q)[1] AS util_p50,
        quantilesExactMerge(0.5, 0.95)(util_q)[2] AS util_p95,
        toUInt64(0) AS incidents,
        '' AS type_count
    FROM
    (
        SELECT
            day,
            node,
            device,
            port,
            multiIf(@by = 'node', node, @by = 'fabric', 'fabric',
                    @by = 'rack' AND rack != '', rack,
                    leaf = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'), leaf) AS grp,
            tx_pause_us, rx_pause_us, ecn, cnp_sent, cnp_handled, discards, oob,
            ber_max, ber_q, post_ber_max, post_ber_q, util_q
        FROM
        (
            -- The whole days of --from..--to from the day rollup (one
            -- FINAL row per port-day, its states finalised on the row; the
            -- BER and utilisation quantile states are merged per bucket
            -- above, exact, so a day or week answers as its port-hours
            -- would)...
            SELECT
                day,
                node,
                device,
                port,
                finalizeAggregation(tx_pause_duration_us) AS tx_pause_us,
                finalizeAggregation(rx_pause_duration_us) AS rx_pause_us,
                finalizeAggregation(np_ecn_marked_roce_packets) AS ecn,
                finalizeAggregation(np_cnp_sent) AS cnp_sent,
                finalizeAggregation(rp_cnp_handled) AS cnp_handled,
                finalizeAggregation(port_xmit_discards) AS discards,
                finalizeAggregation(out_of_buffer) AS oob,
                finalizeAggregation(hour_pre_fec_ber_max) AS ber_max,
                hour_pre_fec_ber_q AS ber_q,
                finalizeAggregation(hour_post_fec_ber_max) AS post_ber_max,
                hour_post_fec_ber_q AS post_ber_q,
                hour_utilisation_q AS util_q
            FROM rollup_day FINAL
            -- From the first midnight at or after --from to the last at or
            -- before --to (server time zone, as the roll cuts days); empty
            -- for --bucket hour.
            WHERE day >= toDate(toDateTime(@from - 1)) + 1
              AND day < if(@bucket = 'hour', toDate(0), toDate(toDateTime(@to)))
              AND (@node = '' OR node = @node)
            UNION ALL
            -- ...and the hours of a partial first or last day from the hour
            -- rollup, rolled into the same per-port-day figures as
            -- rollups/day.sql rolls them.
            SELECT
                toDate(hour) AS day,
                node,
                device,
                port,
                sum(tx_pause_us) AS tx_pause_us,
                sum(rx_pause_us) AS rx_pause_us,
                sum(ecn) AS ecn,
                sum(cnp_sent) AS cnp_sent,
                sum(cnp_handled) AS cnp_handled,
                sum(discards) AS discards,
                sum(oob) AS oob,
                max(ber) AS ber_max,
                quantileExactState(0.5)(ber) AS ber_q,
                max(post_ber) AS post_ber_max,
                quantileExactState(0.5)(post_ber) AS post_ber_q,
                quantilesExactState(0.5, 0.95)(util) AS util_q
            FROM
            (
                SELECT
                    hour,
                    node,
                    device,
                    port,
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
                FROM rollup_hour FINAL
                -- [from, first midnight) and [last midnight, to), each
                -- clipped to --from..--to; both empty for --bucket hour.
                WHERE ((hour >= toStartOfHour(toDateTime(@from))
                        AND hour < if(@bucket = 'hour', toDateTime(0), least(toDateTime(toDate(toDateTime(@from - 1)) + 1), toDateTime(@to))))
                    OR (hour >= greatest(toStartOfDay(toDateTime(@to)), toDateTime(toDate(toDateTime(@from - 1)) + 1))
                        AND hour < if(@bucket = 'hour', toDateTime(0), toDateTime(@to))))
                  AND (@node = '' OR node = @node)
            ) AS edge_hours
            GROUP BY node, device, port, day
        ) AS days
        ANY LEFT JOIN
        (
            SELECT node, device, port, switch AS leaf, rack
            FROM topology_ports FINAL
            WHERE tier = 'leaf'
        ) AS leaves USING (node, device, port)
    ) AS port_days
    GROUP BY bucket, grp
    UNION ALL
    SELECT
        bucket,
        grp,
        toUInt64(0) AS ports,
        toUInt64(0) AS tx_pause_us,
        toUInt64(0) AS rx_pause_us,
        toUInt64(0) AS ecn,
        toUInt64(0) AS cnp_sent,
        toUInt64(0) AS cnp_handled,
        toUInt64(0) AS discards,
        toUInt64(0) AS oob,
        toFloat64(0) AS ber_worst,
        toFloat64(0) AS ber_median,
        toFloat64(0) AS post_ber_worst,
        toFloat64(0) AS post_ber_median,
        toFloat64(0) AS util_p50,
        toFloat64(0) AS util_p95,
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
