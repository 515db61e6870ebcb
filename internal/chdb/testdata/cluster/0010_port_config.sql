CREATE TABLE IF NOT EXISTS rdmawatch.port_config_local ON CLUSTER rdmawatch_test
(
    node String,
    device String,
    port UInt16,
    netdev String,
    time_ms Int64,
    ts DateTime,
    mtu Nullable(UInt32),
    pfc_known UInt8,
    pfc_enabled Array(UInt8),
    ecn_np_known UInt8,
    ecn_np_enabled Array(UInt8),
    ecn_rp_known UInt8,
    ecn_rp_enabled Array(UInt8),
    trust String,
    boot_id String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/port_config', '{replica}')
PARTITION BY toYYYYMM(ts)
ORDER BY (node, device, port, time_ms);

CREATE TABLE IF NOT EXISTS rdmawatch.port_config ON CLUSTER rdmawatch_test AS rdmawatch.port_config_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'port_config_local', cityHash64(node));
