CREATE TABLE IF NOT EXISTS rdmawatch.topology_ports_local ON CLUSTER rdmawatch_test
(
    fabric String,
    node String,
    device String,
    port UInt16,
    switch String,
    switch_port String,
    tier String,
    loaded_at DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/topology_ports', '{replica}', loaded_at)
PARTITION BY fabric
ORDER BY (node, device, port);

CREATE TABLE IF NOT EXISTS rdmawatch.topology_ports ON CLUSTER rdmawatch_test AS rdmawatch.topology_ports_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'topology_ports_local', cityHash64(node));

CREATE TABLE IF NOT EXISTS rdmawatch.topology_links_local ON CLUSTER rdmawatch_test
(
    fabric String,
    a String,
    b String,
    a_tier String,
    b_tier String,
    loaded_at DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/topology_links', '{replica}', loaded_at)
PARTITION BY fabric
ORDER BY (a, b);

CREATE TABLE IF NOT EXISTS rdmawatch.topology_links ON CLUSTER rdmawatch_test AS rdmawatch.topology_links_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'topology_links_local', cityHash64(a));
