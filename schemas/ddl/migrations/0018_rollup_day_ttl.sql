-- requires: 20.3
-- optional: TTL is storage tuning; a server that refuses it gets a warning.
-- The day rollup of 0017 kept 5 years; 18.16 has no TTL and relies on
-- `rdmawatch retention` (its month partitions).
ALTER TABLE rollup_day MODIFY TTL day + INTERVAL 1825 DAY;
