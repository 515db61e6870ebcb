-- The port-hours' utilisation and BER in the day rollup as histogram bins,
-- so `query trends` answers a year of 10 000 ports faster: its day and week
-- buckets merged the exact quantile states of 0017 (every port-hour's
-- Float64, 87.6 M a metric over that year), 22-23 s on 18.16 (BENCHMARKS.md,
-- trends-10k-ports-year). Each column holds the bin key of every port-hour
-- of the port-day (a histogram, one entry per port-hour):
--   hour_utilisation_bins  key round(utilisation * 200), UInt8: bins of
--                          0.5 % of the link's capacity, centre key / 200;
--                          127.5 % and above (only broken counters) is 255.
--   hour_pre_fec_ber_bins, key round(log10(BER) * 20), Int16: bins of 0.05
--   hour_post_fec_ber_bins decade (a factor of 1.122, about 12 %), centre
--                          10^(key / 20); BER 0 is the key -32768, below
--                          every other (log10 of the smallest double is
--                          -324, key -6480).
-- trends.sql merges them per bucket and takes the key at the rank
-- quantileExact takes (0-based floor(level * n) of the n sorted keys): the
-- bin that holds the exact quantile, answered at its centre, so within half
-- a bin of the exact value, on 18.16 and on current releases alike.
--
-- Why quantileExact states of small keys rather than sumMap (key -> count)
-- states: on 18.16 a sumMap state is a std::map of Field arrays, built entry
-- by entry whenever it is read; merging one per port-day made a year of
-- 10 000 ports take 203 s where the exact Float64 states took 22 s (the
-- same rows, one query after the other). These states are a plain array of
-- 1- or 2-byte keys, read and merged as one copy: 12.3-13.0 s against
-- 17.5-22.3 s for the exact states in the same runs of BenchmarkTrends, with
-- the answers that summing the histograms and walking their running counts
-- gives.
--
-- hours is the number of port-hours rolled into the row: 0 on the rows
-- rolled before this migration, which have no bins. trends.sql shows the
-- quantiles of a bucket holding such a port-day as NULL (not those of its
-- other port-days); rolling the day again (the sink does after each of its
-- hours; `rdmawatch rollup` for a range) fills them.
--
-- schemas/ddl/rollups/day.sql writes them and keeps writing the exact states
-- of 0017, which earlier releases' trends read. It names its columns; the
-- day roll of an earlier release does not, and fails on this table
-- ("Number of columns doesn't match") until its sink is upgraded.
ALTER TABLE rollup_day
    ADD COLUMN hour_utilisation_bins AggregateFunction(quantilesExact(0.5, 0.95), UInt8),
    ADD COLUMN hour_pre_fec_ber_bins AggregateFunction(quantileExact(0.5), Int16),
    ADD COLUMN hour_post_fec_ber_bins AggregateFunction(quantileExact(0.5), Int16),
    ADD COLUMN hours UInt16 DEFAULT 0;
