-- Roll the days of [@from, @to) (unix seconds, widened to whole days of
-- the server's time zone) from rollup_day into rollup_day_group (migration
-- 0020): per day, per grouping (leaf, rack, node, fabric) and group, the
-- figures `query trends` reads, its ports counted and its port-hours'
-- histogram bins merged, so a trend over a year without --node reads a row
-- per group-day instead of one per port-day. Run after day.sql rolls the
-- same days (chdb.Roll rolls both). Every row of one roll carries the
-- roll's number, @roll (chdb.Roll: its start in nanoseconds), and
-- trends.sql reads only each day's largest, so a group a port left (a
-- topology loaded since) drops out when its day is rolled again. The
-- grouping is the topology's at the time of the roll: a port counts in the
-- leaf it was cabled to that day.
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
    toUInt64(@roll) AS roll,
    now() AS rolled_at
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
        -- Whole days, as day.sql widens them.
        WHERE day >= toDate(toDateTime(@from)) AND day < toDate(toDateTime(@to - 1)) + 1
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
GROUP BY day, group_by, grp
