-- One row per port per sample. The ORDER BY key is the sample's identity, so a
-- batch that JetStream redelivers (or a sink retries) collapses on merge and
-- under FINAL. Day partitions derive from the same time as the key, so
-- duplicates always meet in one partition, and retention can drop whole days
-- on servers without TTL (18.16).
-- Named delta columns cover the counters people query; the counter_* arrays
-- keep every counter of the sample so nothing read is ever lost.
CREATE TABLE IF NOT EXISTS port_samples
(
    ts DateTime,
    time_ms Int64,
    node String,
    device String,
    port UInt16,
    netdev String,
    link_layer String,
    state String,
    rate String,
    interval_ms Int64,
    boot_id String,
    seq UInt64,
    batch_time_ms Int64,
    first UInt8,
    reset UInt8,
    wrapped UInt8,
    held UInt8,
    saturated Array(String),
    xmit_bytes UInt64,
    rcv_bytes UInt64,
    xmit_packets UInt64,
    rcv_packets UInt64,
    symbol_error UInt64,
    link_error_recovery UInt64,
    link_downed UInt64,
    port_rcv_errors UInt64,
    port_xmit_discards UInt64,
    port_xmit_wait UInt64,
    local_link_integrity_errors UInt64,
    excessive_buffer_overrun_errors UInt64,
    np_ecn_marked_roce_packets UInt64,
    np_cnp_sent UInt64,
    rp_cnp_handled UInt64,
    rp_cnp_ignored UInt64,
    out_of_buffer UInt64,
    out_of_sequence UInt64,
    packet_seq_err UInt64,
    local_ack_timeout_err UInt64,
    rx_bits_phy UInt64,
    rx_corrected_bits_phy UInt64,
    rx_pcs_symbol_err_phy UInt64,
    link_down_events_phy UInt64,
    tx_pause_storm_warning_events UInt64,
    tx_pause_storm_error_events UInt64,
    rx_pause UInt64,
    tx_pause UInt64,
    rx_pause_duration_us UInt64,
    tx_pause_duration_us UInt64,
    rx_prio_pause Array(UInt64),
    tx_prio_pause Array(UInt64),
    rx_prio_pause_duration_us Array(UInt64),
    tx_prio_pause_duration_us Array(UInt64),
    counter_source Array(UInt8),
    counter_name Array(String),
    counter_delta Array(UInt64),
    counter_value Array(UInt64),
    counter_flags Array(UInt8),
    gauge_name Array(String),
    gauge_value Array(UInt64)
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(ts)
ORDER BY (node, device, port, time_ms);
