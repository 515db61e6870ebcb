-- requires: 20.3
-- optional: TTL is storage tuning; a server that refuses it gets a warning.
-- The TTL of 0008 for the rollup tables of 0012, at the same defaults
-- (minute rollup 90 days, hour rollup 2 years); 18.16 has no TTL and relies
-- on `rdmawatch retention`.
ALTER TABLE rollup_minute MODIFY TTL minute + INTERVAL 90 DAY;

ALTER TABLE rollup_hour MODIFY TTL hour + INTERVAL 730 DAY;
