ALTER TABLE rdmawatch.port_samples_local ON CLUSTER rdmawatch_test
    MODIFY COLUMN interval_ms Int64 CODEC(T64, LZ4),
    MODIFY COLUMN batch_time_ms Int64 CODEC(DoubleDelta, LZ4),
    MODIFY COLUMN seq UInt64 CODEC(DoubleDelta, LZ4),
    MODIFY COLUMN xmit_bytes UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rcv_bytes UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN xmit_packets UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rcv_packets UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN symbol_error UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN link_error_recovery UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN link_downed UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN port_rcv_errors UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN port_xmit_discards UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN port_xmit_wait UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN local_link_integrity_errors UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN excessive_buffer_overrun_errors UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN np_ecn_marked_roce_packets UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN np_cnp_sent UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rp_cnp_handled UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rp_cnp_ignored UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN out_of_buffer UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN out_of_sequence UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN packet_seq_err UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN local_ack_timeout_err UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rx_bits_phy UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rx_corrected_bits_phy UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rx_pcs_symbol_err_phy UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN link_down_events_phy UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN tx_pause_storm_warning_events UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN tx_pause_storm_error_events UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rx_pause UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN tx_pause UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rx_pause_duration_us UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN tx_pause_duration_us UInt64 CODEC(T64, LZ4),
    MODIFY COLUMN rate_gbps Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN rcv_gbps Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN xmit_gbps Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN utilisation Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN tx_pause_fraction Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN rx_pause_fraction Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN pre_fec_ber Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN post_fec_ber Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN symbol_ber Float64 DEFAULT 0 CODEC(Gorilla, LZ4),
    MODIFY COLUMN counter_name Array(String) CODEC(ZSTD(1)),
    MODIFY COLUMN counter_delta Array(UInt64) CODEC(ZSTD(1)),
    MODIFY COLUMN counter_value Array(UInt64) CODEC(ZSTD(1)),
    MODIFY COLUMN gauge_name Array(String) CODEC(ZSTD(1)),
    MODIFY COLUMN gauge_value Array(UInt64) CODEC(ZSTD(1)),
    MODIFY COLUMN netdev String CODEC(ZSTD(1)),
    MODIFY COLUMN rate String CODEC(ZSTD(1)),
    MODIFY COLUMN boot_id String CODEC(ZSTD(1));

DROP TABLE IF EXISTS rdmawatch.port_samples ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.port_samples ON CLUSTER rdmawatch_test AS rdmawatch.port_samples_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'port_samples_local', cityHash64(node));

ALTER TABLE rdmawatch.port_samples_local ON CLUSTER rdmawatch_test MODIFY TTL ts + INTERVAL 14 DAY;

ALTER TABLE rdmawatch.port_minute_local ON CLUSTER rdmawatch_test MODIFY TTL minute + INTERVAL 90 DAY;

ALTER TABLE rdmawatch.port_hour_local ON CLUSTER rdmawatch_test MODIFY TTL hour + INTERVAL 730 DAY;
