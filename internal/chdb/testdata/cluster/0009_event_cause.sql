ALTER TABLE rdmawatch.events_local ON CLUSTER rdmawatch_test
    ADD COLUMN cause_id String DEFAULT '',
    ADD COLUMN cause_type String DEFAULT '',
    ADD COLUMN cause_node String DEFAULT '',
    ADD COLUMN cause_device String DEFAULT '',
    ADD COLUMN cause_port UInt16 DEFAULT 0;

DROP TABLE IF EXISTS rdmawatch.events ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.events ON CLUSTER rdmawatch_test AS rdmawatch.events_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'events_local', cityHash64(id));

DROP TABLE IF EXISTS rdmawatch.events_latest ON CLUSTER rdmawatch_test;

CREATE VIEW IF NOT EXISTS rdmawatch.events_latest ON CLUSTER rdmawatch_test AS
SELECT
    type,
    id,
    max(rev) AS revision,
    argMax(state, rev) AS state,
    argMax(severity, rev) AS severity,
    argMax(scope, rev) AS scope,
    argMax(subject_node, rev) AS subject_node,
    argMax(subject_device, rev) AS subject_device,
    argMax(subject_port, rev) AS subject_port,
    argMax(start_ms, rev) AS start_ms,
    min(detected_at_ms) AS first_detected_at_ms,
    max(detected_at_ms) AS last_detected_at_ms,
    argMax(end_ms, rev) AS end_ms,
    argMax(start_ts, rev) AS start_ts,
    argMax(end_ts, rev) AS end_ts,
    argMax(layer, rev) AS layer,
    argMax(summary, rev) AS summary,
    argMax(evidence, rev) AS evidence,
    argMax(next_checks, rev) AS next_checks,
    argMax(has_origin, rev) AS has_origin,
    argMax(origin_node, rev) AS origin_node,
    argMax(origin_device, rev) AS origin_device,
    argMax(origin_port, rev) AS origin_port,
    argMax(origin_silent, rev) AS origin_silent,
    argMax(affected, rev) AS affected,
    argMax(affected_node, rev) AS affected_node,
    argMax(affected_device, rev) AS affected_device,
    argMax(affected_port, rev) AS affected_port,
    argMax(affected_first_seen_ms, rev) AS affected_first_seen_ms,
    argMax(affected_hops, rev) AS affected_hops,
    argMax(affected_pause_fraction, rev) AS affected_pause_fraction,
    argMax(cause_id, rev) AS cause_id,
    argMax(cause_type, rev) AS cause_type,
    argMax(cause_node, rev) AS cause_node,
    argMax(cause_device, rev) AS cause_device,
    argMax(cause_port, rev) AS cause_port
FROM (SELECT *, revision AS rev FROM rdmawatch.events)
GROUP BY type, id;
