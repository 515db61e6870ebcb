ALTER TABLE rdmawatch.rollup_day_local ON CLUSTER rdmawatch_test
    ADD COLUMN hour_utilisation_bins AggregateFunction(quantilesExact(0.5, 0.95), UInt8),
    ADD COLUMN hour_pre_fec_ber_bins AggregateFunction(quantileExact(0.5), Int16),
    ADD COLUMN hour_post_fec_ber_bins AggregateFunction(quantileExact(0.5), Int16),
    ADD COLUMN hours UInt16 DEFAULT 0;

DROP TABLE IF EXISTS rdmawatch.rollup_day ON CLUSTER rdmawatch_test;

CREATE TABLE rdmawatch.rollup_day ON CLUSTER rdmawatch_test AS rdmawatch.rollup_day_local
ENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'rollup_day_local', cityHash64(node));
