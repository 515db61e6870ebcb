ALTER TABLE rdmawatch.port_samples_local ON CLUSTER rdmawatch_test
    ADD COLUMN rate_gbps Float64 DEFAULT 0,
    ADD COLUMN rcv_gbps Float64 DEFAULT 0,
    ADD COLUMN xmit_gbps Float64 DEFAULT 0,
    ADD COLUMN utilisation Float64 DEFAULT 0,
    ADD COLUMN tx_pause_fraction Float64 DEFAULT 0,
    ADD COLUMN rx_pause_fraction Float64 DEFAULT 0,
    ADD COLUMN pre_fec_ber Float64 DEFAULT 0,
    ADD COLUMN post_fec_ber Float64 DEFAULT 0,
    ADD COLUMN symbol_ber Float64 DEFAULT 0;

DROP TABLE IF EXISTS rdmawatch.port_samples ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.port_samples ON CLUSTER rdmawatch_test AS rdmawatch.port_samples_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'port_samples_local', cityHash64(node));
