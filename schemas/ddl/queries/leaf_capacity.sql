-- question: How busy is each leaf, hour by hour, for capacity planning? Per leaf switch (from the topology loaded by `rdmawatch migrate --topology FILE`; ports it does not know are grouped by node-name prefix, e.g. "gpu*") and hour over --from..--to: ports, bytes each way, utilisation p50/p95/max over its ports' samples, pause time, errors and CNPs.
SELECT
    hour,
    if(leaf = '', concat(replaceRegexpOne(node, '[-_]?[0-9]+$', ''), '*'), leaf) AS leaf_group,
    uniqExact(node, device, port) AS ports,
    sumMerge(rcv_bytes) AS rcv_bytes,
    sumMerge(xmit_bytes) AS xmit_bytes,
    round(quantilesMerge(0.5, 0.95)(utilisation_q)[1], 4) AS utilisation_p50,
    round(quantilesMerge(0.5, 0.95)(utilisation_q)[2], 4) AS utilisation_p95,
    round(maxMerge(utilisation_max), 4) AS utilisation_max,
    round(sumMerge(tx_pause_duration_us) / 1e6, 3) AS tx_pause_s,
    round(sumMerge(rx_pause_duration_us) / 1e6, 3) AS rx_pause_s,
    sumMerge(symbol_error) + sumMerge(port_rcv_errors) + sumMerge(port_xmit_discards) + sumMerge(link_downed) AS errors,
    sumMerge(np_cnp_sent) AS cnp_sent,
    sumMerge(rp_cnp_handled) AS cnp_handled
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
GROUP BY hour, leaf_group
ORDER BY hour, leaf_group
