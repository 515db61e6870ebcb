ALTER TABLE rdmawatch.rollup_day_group_local ON CLUSTER rdmawatch_test MODIFY TTL day + INTERVAL 1825 DAY;
