ALTER TABLE rdmawatch.rollup_minute_local ON CLUSTER rdmawatch_test MODIFY TTL minute + INTERVAL 90 DAY;

ALTER TABLE rdmawatch.rollup_hour_local ON CLUSTER rdmawatch_test MODIFY TTL hour + INTERVAL 730 DAY;
