-- question: Which ports saturate or flap? Per port over --from..--to, from the minute rollup: minutes whose busiest sample reached 90% of the link rate, the highest utilisation, link downs, link error recoveries and physical link-down events; only ports with any of these, worst first (--limit rows).
SELECT
    node,
    device,
    port,
    countIf(util_max >= 0.9) AS saturated_minutes,
    round(max(util_max), 4) AS utilisation_max,
    round(max(util_p95), 4) AS utilisation_p95_max,
    sum(downs) AS link_downs,
    sum(recoveries) AS link_recoveries,
    sum(phy_downs) AS phy_link_down_events,
    sum(discards) AS xmit_discards
FROM
(
    SELECT
        node,
        device,
        port,
        minute,
        maxMerge(utilisation_max) AS util_max,
        quantilesMerge(0.5, 0.95)(utilisation_q)[2] AS util_p95,
        sumMerge(link_downed) AS downs,
        sumMerge(link_error_recovery) AS recoveries,
        sumMerge(link_down_events_phy) AS phy_downs,
        sumMerge(port_xmit_discards) AS discards
    FROM rollup_minute FINAL
    WHERE minute >= toStartOfMinute(toDateTime(@from)) AND minute < toDateTime(@to)
      AND (@node = '' OR node = @node)
      AND (@device = '' OR device = @device)
      AND (@port = 0 OR port = @port)
    GROUP BY node, device, port, minute
)
GROUP BY node, device, port
HAVING saturated_minutes > 0 OR link_downs > 0 OR link_recoveries > 0 OR phy_link_down_events > 0
ORDER BY link_downs + phy_link_down_events DESC, saturated_minutes DESC, node, device, port
LIMIT @limit
