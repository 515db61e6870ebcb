CREATE TABLE IF NOT EXISTS rdmawatch.schema_migrations_local ON CLUSTER rdmawatch_test
(
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/rdmawatch/schema_migrations', '{replica}') ORDER BY version;

CREATE TABLE IF NOT EXISTS rdmawatch.schema_migrations ON CLUSTER rdmawatch_test AS rdmawatch.schema_migrations_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'schema_migrations_local', version);
