CREATE TABLE IF NOT EXISTS rdmawatch.rollup_day_group_local ON CLUSTER rdmawatch_test
(
    day Date,
    group_by String,
    grp String,
    ports AggregateFunction(uniqExact, String, String, UInt16),
    tx_pause_us UInt64,
    rx_pause_us UInt64,
    ecn UInt64,
    cnp_sent UInt64,
    cnp_handled UInt64,
    discards UInt64,
    oob UInt64,
    ber_max Float64,
    ber_bins AggregateFunction(quantileExact(0.5), Int16),
    post_ber_max Float64,
    post_ber_bins AggregateFunction(quantileExact(0.5), Int16),
    util_bins AggregateFunction(quantilesExact(0.5, 0.95), UInt8),
    min_hours UInt16,
    roll UInt64,
    rolled_at DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/rollup_day_group', '{replica}', roll)
PARTITION BY toYYYYMM(day)
ORDER BY (group_by, day, grp);

CREATE TABLE IF NOT EXISTS rdmawatch.rollup_day_group ON CLUSTER rdmawatch_test AS rdmawatch.rollup_day_group_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'rollup_day_group_local', cityHash64(grp));

INSERT INTO rdmawatch.rollup_day_group (day, group_by, grp, ports, tx_pause_us, rx_pause_us, ecn, cnp_sent,
    cnp_handled, discards, oob, ber_max, ber_bins, post_ber_max, post_ber_bins, util_bins, min_hours,
    roll, rolled_at)
SELECT
    day,
    group_by,
    multiIf(group_by = 'node', node, group_by = 'fabric', 'fabric',
            group_by = 'rack' AND rack != '', rack,
            leaf = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'), leaf) AS grp,
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
    min(hours) AS min_hours,
    toUInt64(0) AS roll,
    toDateTime(0) AS rolled_at
FROM
(
    SELECT *
    FROM
    (
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
        FROM rdmawatch.rollup_day FINAL
    ) AS port_days
    ANY LEFT JOIN
    (
        SELECT node, device, port, switch AS leaf, rack
        FROM rdmawatch.topology_ports FINAL
        WHERE tier = 'leaf'
    ) AS leaves USING (node, device, port)
) AS placed
ARRAY JOIN ['leaf', 'rack', 'node', 'fabric'] AS group_by
GROUP BY day, group_by, grp;
