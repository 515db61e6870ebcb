-- question: Which incidents overlapped --from..--to, and what is the latest state of each? One row per incident (events_latest: the highest revision wins, redelivered copies change nothing), in onset order.
-- filters: --node matches the subject, the storm origin or any affected port's node; --type, --severity, --state and --layer take comma-separated lists.
SELECT
    toDateTime(intDiv(start_ms, 1000)) AS start,
    if(isNull(end_ms), NULL, toDateTime(intDiv(assumeNotNull(end_ms), 1000))) AS end,
    type,
    state,
    severity,
    scope,
    concat(subject_node, if(subject_device = '', '', concat('/', subject_device, '/', toString(subject_port)))) AS subject,
    layer,
    revision,
    summary,
    id,
    evidence,
    next_checks
FROM events_latest
WHERE start_ms < @to * 1000
  AND (isNull(end_ms) OR assumeNotNull(end_ms) >= @from * 1000)
  AND (@node = '' OR subject_node = @node OR origin_node = @node OR has(affected_node, @node))
  AND (@type = '' OR has(splitByChar(',', @type), type))
  AND (@severity = '' OR has(splitByChar(',', @severity), severity))
  AND (@state = '' OR has(splitByChar(',', @state), state))
  AND (@layer = '' OR has(splitByChar(',', @layer), layer))
ORDER BY start_ms, type, id
