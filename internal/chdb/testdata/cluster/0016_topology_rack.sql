ALTER TABLE rdmawatch.topology_ports_local ON CLUSTER rdmawatch_test
    ADD COLUMN rack String DEFAULT '';

DROP TABLE IF EXISTS rdmawatch.topology_ports ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.topology_ports ON CLUSTER rdmawatch_test AS rdmawatch.topology_ports_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'topology_ports_local', cityHash64(node));
