-- question: How did each PFC storm spread? Per storm overlapping --from..--to: its origin, then every affected port by hop count and first-seen time (seconds after the onset), with the pause fraction it saw.
-- filters: --node matches the origin or any affected port's node.
SELECT
    toDateTime(intDiv(start_ms, 1000)) AS start,
    id,
    state,
    concat(origin_node, '/', origin_device, '/', toString(origin_port)) AS origin,
    origin_silent,
    a_node AS node,
    a_device AS device,
    a_port AS port,
    a_hops AS hops,
    toDateTime(intDiv(a_first_seen_ms, 1000)) AS first_seen,
    round((a_first_seen_ms - start_ms) / 1000, 1) AS after_onset_s,
    round(a_pause_fraction, 3) AS pause_fraction
FROM events_latest
LEFT ARRAY JOIN
    affected_node AS a_node,
    affected_device AS a_device,
    affected_port AS a_port,
    affected_hops AS a_hops,
    affected_first_seen_ms AS a_first_seen_ms,
    affected_pause_fraction AS a_pause_fraction
WHERE type = 'pfc_storm'
  AND start_ms < @to * 1000
  AND (isNull(end_ms) OR assumeNotNull(end_ms) >= @from * 1000)
  AND (@node = '' OR origin_node = @node OR has(affected_node, @node))
ORDER BY start_ms, id, hops, a_first_seen_ms, node, device, port
