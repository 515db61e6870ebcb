-- The latest description of every port: ReplacingMergeTree keeps the row
-- with the highest last_seen per (node, device, port); read it with FINAL or
-- argMax(..., last_seen).
CREATE TABLE IF NOT EXISTS inventory
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
ENGINE = ReplacingMergeTree(last_seen)
ORDER BY (node, device, port);
