-- Derived values people query, computed by the sink from the deltas and the
-- interval (sink.Derived): throughput in Gb/s, the busier direction's
-- utilisation of the link rate, the pause fraction of the busiest priority,
-- pre-/post-FEC BER (Ethernet) and symbol BER (InfiniBand). Rows written
-- before this step read 0. 18.16 has no ADD COLUMN IF NOT EXISTS: Migrate
-- treats "column already exists" on an ADD COLUMN as done.
ALTER TABLE port_samples
    ADD COLUMN rate_gbps Float64 DEFAULT 0,
    ADD COLUMN rcv_gbps Float64 DEFAULT 0,
    ADD COLUMN xmit_gbps Float64 DEFAULT 0,
    ADD COLUMN utilisation Float64 DEFAULT 0,
    ADD COLUMN tx_pause_fraction Float64 DEFAULT 0,
    ADD COLUMN rx_pause_fraction Float64 DEFAULT 0,
    ADD COLUMN pre_fec_ber Float64 DEFAULT 0,
    ADD COLUMN post_fec_ber Float64 DEFAULT 0,
    ADD COLUMN symbol_ber Float64 DEFAULT 0;
