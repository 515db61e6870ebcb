-- requires: 20.3
-- optional: TTL is storage tuning; a server that refuses it gets a warning.
-- The group-day rollup of 0020 keeps what rollup_day keeps (0018): 5 years.
ALTER TABLE rollup_day_group MODIFY TTL day + INTERVAL 1825 DAY;
