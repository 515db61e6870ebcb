-- question: Are congestion notifications balanced? Per node and for the whole fabric over --from..--to: ECN-marked packets and CNPs sent (notification point) against CNPs handled and ignored (reaction point). Across a healthy fabric sent and handled match; a gap says CNPs are lost or ignored.
-- filters: --node limits the node rows; the fabric row always covers every node.
SELECT
    level,
    node,
    ecn_marked,
    cnp_sent,
    cnp_handled,
    cnp_ignored,
    toInt64(cnp_handled) - toInt64(cnp_sent) AS handled_minus_sent,
    if(cnp_sent > 0, round(cnp_handled / cnp_sent, 3), 0) AS handled_per_sent
FROM
(
    SELECT
        'node' AS level,
        node,
        sumMerge(np_ecn_marked_roce_packets) AS ecn_marked,
        sumMerge(np_cnp_sent) AS cnp_sent,
        sumMerge(rp_cnp_handled) AS cnp_handled,
        sumMerge(rp_cnp_ignored) AS cnp_ignored
    FROM rollup_minute FINAL
    WHERE minute >= toStartOfMinute(toDateTime(@from)) AND minute < toDateTime(@to)
      AND (@node = '' OR node = @node)
    GROUP BY node
    UNION ALL
    SELECT
        'fabric' AS level,
        '' AS node,
        sumMerge(np_ecn_marked_roce_packets) AS ecn_marked,
        sumMerge(np_cnp_sent) AS cnp_sent,
        sumMerge(rp_cnp_handled) AS cnp_handled,
        sumMerge(rp_cnp_ignored) AS cnp_ignored
    FROM rollup_minute FINAL
    WHERE minute >= toStartOfMinute(toDateTime(@from)) AND minute < toDateTime(@to)
)
ORDER BY level = 'fabric', node
