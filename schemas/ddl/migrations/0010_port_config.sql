-- Each RoCE port's configuration with its history (docs/formats.md,
-- "Configuration"): one row per (node, device, port, time_ms) at which the
-- sink saw the port's config change, or saw it unchanged on an inventory
-- refresh (every 5 min of data time), so "what was configured then" is the
-- latest row at or before then, and a change is a row that differs from the
-- one before it. A redelivered inventory writes the same key again, which
-- ReplacingMergeTree collapses. Unknown stays unknown: mtu is NULL and a
-- priority list's *_known is 0 when the host did not expose it (an empty
-- list with *_known 1 means "on for no priority"); trust '' is unknown.
-- Plain types only (Nullable, Array(UInt8)): ClickHouse 18.16 and current
-- releases alike.
CREATE TABLE IF NOT EXISTS port_config
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
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (node, device, port, time_ms);
