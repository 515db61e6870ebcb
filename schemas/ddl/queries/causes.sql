-- question: Which root causes explain which incidents in --from..--to? One row per root-cause incident (one that names no cause of its own and explains at least one other), with the incidents it explains (their ids, types, subjects, in onset order), in onset order.
-- filters: --node matches the root cause's or any explained incident's subject node; --type, --severity, --state and --layer apply to the root-cause incident.
SELECT
    toDateTime(intDiv(start_ms, 1000)) AS start,
    type,
    state,
    severity,
    subject,
    length(effects) AS explains,
    arrayMap(x -> x.3, effects) AS effect_types,
    arrayMap(x -> x.4, effects) AS effect_subjects,
    arrayMap(x -> x.2, effects) AS effect_ids,
    summary,
    id
FROM
(
    SELECT
        id, type, state, severity, layer, subject_node, start_ms, end_ms, summary,
        concat(subject_node, if(subject_device = '', '', concat('/', subject_device, '/', toString(subject_port)))) AS subject
    FROM events_latest
    WHERE cause_id = ''
      AND start_ms < @to * 1000
      AND (isNull(end_ms) OR assumeNotNull(end_ms) >= @from * 1000)
) AS roots
ALL INNER JOIN
(
    SELECT
        cause_id AS id,
        arraySort(groupArray((effect_start_ms, effect_id, effect_type, effect_subject))) AS effects,
        groupArray(effect_node) AS effect_nodes
    FROM
    (
        -- The explained incidents, renamed so that "id" names the cause.
        SELECT
            cause_id,
            start_ms AS effect_start_ms,
            id AS effect_id,
            type AS effect_type,
            concat(subject_node, if(subject_device = '', '', concat('/', subject_device, '/', toString(subject_port)))) AS effect_subject,
            subject_node AS effect_node
        FROM events_latest
        WHERE cause_id != ''
    )
    GROUP BY cause_id
) AS explained USING (id)
WHERE (@node = '' OR subject_node = @node OR has(effect_nodes, @node))
  AND (@type = '' OR has(splitByChar(',', @type), type))
  AND (@severity = '' OR has(splitByChar(',', @severity), severity))
  AND (@state = '' OR has(splitByChar(',', @state), state))
  AND (@layer = '' OR has(splitByChar(',', @layer), layer))
ORDER BY start_ms, type, id
