-- The fabric topology (format v1), loaded by `rdmawatch migrate --topology
-- FILE`: which switch port every host port is cabled to, so capacity
-- queries can group ports by leaf. One partition per fabric: loading a
-- fabric again drops its partition first, so a removed cable disappears.
CREATE TABLE IF NOT EXISTS topology_ports
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
ENGINE = ReplacingMergeTree(loaded_at)
PARTITION BY fabric
ORDER BY (node, device, port);

CREATE TABLE IF NOT EXISTS topology_links
(
    fabric String,
    a String,
    b String,
    a_tier String,
    b_tier String,
    loaded_at DateTime
)
ENGINE = ReplacingMergeTree(loaded_at)
PARTITION BY fabric
ORDER BY (a, b);
