-- question: How do congestion, loss, BER, load and incidents trend, for capacity planning? Per --bucket (hour, day or week; default day) and per --by group (leaf, from the loaded topology, unknown ports grouped by node-name prefix; rack, from the topology's "racks", a node in no rack grouped by its leaf; node; or fabric; default leaf) over --from..--to, from the day rollups for --bucket day and week (rollup_day_group's group-days, rollup_day's port-days with --node; kept five years by default; the hour rollup for the hours of a partial first or last day) and the hour rollup for --bucket hour (kept two years): ports, PFC pause seconds each way, ECN-marked packets, CNPs sent and handled, discards and out_of_buffer, pre- and post-FEC BER worst and median over port-hours, utilisation p50/p95 over port-hours (mean of the busier direction; for --bucket day and week the medians and p50/p95 to histogram bins: 0.5 % of capacity, 0.05 decade of BER), and the incidents that started in the bucket, in all and by type ("pfc_storm:2,ber_drift:1").
-- filters: --node limits the ports and incidents read. A port-scope incident counts in its port's group, a node-scope one in its node's (first leaf's) group, a fabric-scope one in the group "fabric". spine is refused: every leaf uplinks to every spine, so a spine's group would be the whole fabric again.
-- Resolution: --bucket hour computes every quantile exactly from the hour
-- rollup. --bucket day and week take them from the port-hours' histogram
-- bins in the day rollup (migration 0019): utilisation in bins of 0.5 % of
-- capacity (key round(u * 200), centre key / 200), BER in bins of 0.05
-- decade, a factor of 1.122 or 12 % (key round(log10(BER) * 20), centre
-- 10^(key / 20); BER 0 its own bin). The answer is the centre of the bin
-- holding the exact quantile, so within 0.25 % of capacity and a factor of
-- 1.06 of it. A bucket holding a port-day rolled before 0019 (no bins) has
-- these four columns NULL until the day is rolled again; a bucket of
-- incidents only has them 0.
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
    -- The quantiles are NULL where the port row has them NULL (port-days
    -- rolled before migration 0019), 0 in a bucket of incidents only.
    if(ports = 0, 0, sum(ber_median)) AS pre_fec_ber_median,
    max(post_ber_worst) AS post_fec_ber_worst,
    if(ports = 0, 0, sum(post_ber_median)) AS post_fec_ber_median,
    if(ports = 0, 0, round(sum(util_p50), 4)) AS utilisation_p50,
    if(ports = 0, 0, round(sum(util_p95), 4)) AS utilisation_p95,
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
        uniqExactMerge(ports) AS ports,
        sum(tx_pause_us) AS tx_pause_us,
        sum(rx_pause_us) AS rx_pause_us,
        sum(ecn) AS ecn,
        sum(cnp_sent) AS cnp_sent,
        sum(cnp_handled) AS cnp_handled,
        sum(discards) AS discards,
        sum(oob) AS oob,
        max(ber_max) AS ber_worst,
        -- The quantiles from the port-hours' histogram bins (migration
        -- 0019): the bin key at the rank quantileExact takes, 0-based
        -- floor(level * n) of the bucket's n port-hours sorted, answered at
        -- the bin's centre. NULL where a port-day of the bucket was rolled
        -- before 0019 (hours 0, no bins): the other port-days' quantiles
        -- alone would be wrong.
        if(min(hours) = 0, NULL,
           if((quantileExactMerge(0.5)(ber_bins) AS ber_key) = -32768, 0, exp10(ber_key / 20))) AS ber_median,
        max(post_ber_max) AS post_ber_worst,
        if(min(hours) = 0, NULL,
           if((quantileExactMerge(0.5)(post_ber_bins) AS post_ber_key) = -32768, 0, exp10(post_ber_key / 20))) AS post_ber_median,
        if(min(hours) = 0, NULL, quantilesExactMerge(0.5, 0.95)(util_bins)[1] / 200) AS util_p50,
        if(min(hours) = 0, NULL, quantilesExactMerge(0.5, 0.95)(util_bins)[2] / 200) AS util_p95,
        toUInt64(0) AS incidents,
        '' AS type_count
    FROM
    (
        -- One row per day and group, its ports and bins as states merged
        -- per bucket above. Without --node the whole days come from the
        -- group-day rollup (migration 0020: a row per group-day where
        -- rollup_day has one per port-day; each day's newest roll only,
        -- so a group a topology load emptied is left out)...
        SELECT
            day,
            grp,
            ports,
            tx_pause_us, rx_pause_us, ecn, cnp_sent, cnp_handled, discards, oob,
            ber_max, ber_bins, post_ber_max, post_ber_bins, util_bins,
            min_hours AS hours
        FROM rollup_day_group
        WHERE day >= toDate(toDateTime(@from - 1)) + 1
          AND day < if(@bucket = 'hour' OR @node != '', toDate(0), toDate(toDateTime(@to)))
          AND group_by = @by
          -- Each day's newest roll, whose rows are each group once: no
          -- FINAL (it merged the states on one thread on 18.16). GLOBAL:
          -- in cluster mode the newest rolls are read once, on this
          -- server, over every shard.
          AND (day, roll) GLOBAL IN
          (
              SELECT day, max(roll)
              FROM rollup_day_group
              WHERE day >= toDate(toDateTime(@from - 1)) + 1
                AND day < if(@bucket = 'hour' OR @node != '', toDate(0), toDate(toDateTime(@to)))
              GROUP BY day
          )
        UNION ALL
        -- ...and from the port-days (the whole days with --node, the
        -- partial first and last days always) grouped into the same states.
        SELECT
            day,
            grp,
            uniqExactState(node, device, port) AS ports,
            sum(tx_pause_us) AS tx_pause_us,
            sum(rx_pause_us) AS rx_pause_us,
            sum(ecn) AS ecn,
            sum(cnp_sent) AS cnp_sent,
            sum(cnp_handled) AS cnp_handled,
            sum(discards) AS discards,
            sum(oob) AS oob,
            max(ber_max) AS ber_max,
            quantileExactMergeState(0.5)(ber_bins) AS ber_bins,
            max(post_ber_max) AS post_ber_max,
            quantileExactMergeState(0.5)(post_ber_bins) AS post_ber_bins,
            quantilesExactMergeState(0.5, 0.95)(util_bins) AS util_bins,
            min(hours) AS hours
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
                ber_max, ber_bins, post_ber_max, post_ber_bins, util_bins, hours
            FROM
            (
                -- The whole days of --from..--to from the day rollup with
                -- --node (one FINAL row per port-day, its states finalised on
                -- the row)...
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
                    hour_pre_fec_ber_bins AS ber_bins,
                    finalizeAggregation(hour_post_fec_ber_max) AS post_ber_max,
                    hour_post_fec_ber_bins AS post_ber_bins,
                    hour_utilisation_bins AS util_bins,
                    hours
                FROM rollup_day FINAL
                -- From the first midnight at or after --from to the last at or
                -- before --to (server time zone, as the roll cuts days); empty
                -- for --bucket hour.
                WHERE day >= toDate(toDateTime(@from - 1)) + 1
                  AND day < if(@bucket = 'hour' OR @node = '', toDate(0), toDate(toDateTime(@to)))
                  AND node = @node
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
                    quantileExactState(0.5)(if(ber > 0, toInt16(round(log10(ber) * 20)), toInt16(-32768))) AS ber_bins,
                    max(post_ber) AS post_ber_max,
                    quantileExactState(0.5)(if(post_ber > 0, toInt16(round(log10(post_ber) * 20)), toInt16(-32768))) AS post_ber_bins,
                    quantilesExactState(0.5, 0.95)(toUInt8(least(round(util * 200), 255))) AS util_bins,
                    toUInt16(count()) AS hours
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
        GROUP BY day, grp
    ) AS group_days
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
        CAST(NULL AS Nullable(Float64)) AS ber_median,
        toFloat64(0) AS post_ber_worst,
        CAST(NULL AS Nullable(Float64)) AS post_ber_median,
        CAST(NULL AS Nullable(Float64)) AS util_p50,
        CAST(NULL AS Nullable(Float64)) AS util_p95,
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
