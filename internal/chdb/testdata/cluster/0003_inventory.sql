CREATE TABLE IF NOT EXISTS rdmawatch.inventory_local ON CLUSTER rdmawatch_test
(
    node String,
    device String,
    port UInt16,
    netdev String,
    link_layer String,
    state String,
    rate String,
    fw_ver String,
    board_id String,
    hca_type String,
    node_guid String,
    boot_id String,
    last_seen DateTime,
    last_seen_ms Int64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/inventory', '{replica}', last_seen)
ORDER BY (node, device, port);

CREATE TABLE IF NOT EXISTS rdmawatch.inventory ON CLUSTER rdmawatch_test AS rdmawatch.inventory_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'inventory_local', cityHash64(node));
