-- One row per incident state change. (type, id, revision) names a state
-- change, so a redelivered event collapses. end_ms is NULL while the incident
-- is open, as `end` is null in the JSON form. Month partitions by detection
-- time keep every revision of a redelivered change in one partition.
CREATE TABLE IF NOT EXISTS events
(
    id String,
    type String,
    state String,
    severity String,
    scope String,
    revision UInt32,
    subject_node String,
    subject_device String,
    subject_port UInt16,
    start_ms Int64,
    detected_at_ms Int64,
    end_ms Nullable(Int64),
    start_ts DateTime,
    detected_at_ts DateTime,
    end_ts Nullable(DateTime),
    layer String,
    summary String,
    evidence String,
    next_checks Array(String),
    has_origin UInt8,
    origin_node String,
    origin_device String,
    origin_port UInt16,
    origin_silent UInt8,
    affected String,
    affected_node Array(String),
    affected_device Array(String),
    affected_port Array(UInt16),
    affected_first_seen_ms Array(Int64),
    affected_hops Array(UInt8),
    affected_pause_fraction Array(Float64)
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(detected_at_ts)
ORDER BY (type, id, revision);
