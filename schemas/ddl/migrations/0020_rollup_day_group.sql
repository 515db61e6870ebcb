-- The group-day rollup: per day, per grouping of `query trends --by`
-- (leaf, rack, node, fabric) and group, the figures trends reads for its
-- day and week buckets, rolled from rollup_day by
-- schemas/ddl/rollups/day_group.sql whenever a day is (chdb.Roll). A year
-- of 10 000 ports read from rollup_day was 3.65 M port-day rows, FINAL on
-- one thread on 18.16, and 3 x 3.65 M histogram states merged: 12.3-13.0 s.
-- Here it is a row per group-day (313 leaves, 1 250 nodes a day for 10 000
-- ports) holding the same states merged per group.
--   ports         uniqExact state of the group's (node, device, port): a
--                 week's bucket counts a port once however many days it had
--   ber_bins,     the port-hours' histogram bins of 0019, merged over the
--   post_ber_bins group's port-days
--   util_bins
--   min_hours     the fewest port-hours of any port-day of the group: 0
--                 when one was rolled before 0019 (no bins), which trends
--                 shows as NULL quantiles as it does from rollup_day
-- A roll writes every group of its days with one roll number (its start in
-- nanoseconds, from the roller: every roll a number of its own, later rolls
-- larger), and trends reads only each day's largest: a group that a
-- topology load emptied is left out once its days are rolled again
-- (`rdmawatch rollup --from ... --to ...`), and the rows of older rolls
-- that merges have not removed yet are skipped without FINAL, which made
-- a year of 10 000 ports 2.4 x slower on 18.16 (one thread merging the
-- states). ReplacingMergeTree(roll) removes older rolls' rows of a key in
-- the background and never the newest roll's. Partitioned by month as
-- rollup_day, so `rdmawatch retention` drops it with rollup_day's limit on
-- 18.16; TTL in 0021.
CREATE TABLE IF NOT EXISTS rollup_day_group
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
ENGINE = ReplacingMergeTree(roll)
PARTITION BY toYYYYMM(day)
ORDER BY (group_by, day, grp);

-- Every day rollup_day already holds, as the roll would write it
-- (roll 0: the sink's next roll of a day replaces it).
INSERT INTO rollup_day_group (day, group_by, grp, ports, tx_pause_us, rx_pause_us, ecn, cnp_sent,
    cnp_handled, discards, oob, ber_max, ber_bins, post_ber_max, post_ber_bins, util_bins, min_hours,
    roll, rolled_at)
SELECT
    day,
    group_by,
    -- trends.sql's grouping: a port on no leaf goes to its node-name
    -- prefix ("gpu-*"), a node in no rack to its leaf.
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
        FROM rollup_day FINAL
    ) AS port_days
    ANY LEFT JOIN
    (
        SELECT node, device, port, switch AS leaf, rack
        FROM topology_ports FINAL
        WHERE tier = 'leaf'
    ) AS leaves USING (node, device, port)
) AS placed
-- Each port-day once per grouping.
ARRAY JOIN ['leaf', 'rack', 'node', 'fabric'] AS group_by
GROUP BY day, group_by, grp;
