ALTER TABLE rdmawatch.port_config_local ON CLUSTER rdmawatch_test
    ADD COLUMN dscp_prio Array(UInt8),
    ADD COLUMN cnp_dscp Nullable(UInt8),
    ADD COLUMN cnp_802p_prio Nullable(UInt8),
    ADD COLUMN traffic_class Nullable(UInt8);

DROP TABLE IF EXISTS rdmawatch.port_config ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.port_config ON CLUSTER rdmawatch_test AS rdmawatch.port_config_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'port_config_local', cityHash64(node));
