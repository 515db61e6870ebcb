CREATE TABLE IF NOT EXISTS rdmawatch.events_local ON CLUSTER rdmawatch_test
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/events', '{replica}')
PARTITION BY toYYYYMM(detected_at_ts)
ORDER BY (type, id, revision);

CREATE TABLE IF NOT EXISTS rdmawatch.events ON CLUSTER rdmawatch_test AS rdmawatch.events_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'events_local', cityHash64(id));
