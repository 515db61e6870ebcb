-- The port settings that decide which priority RoCE traffic and its CNPs
-- travel on (docs/formats.md, "Configuration"): the DSCP-to-priority map
-- (dscp_prio[d + 1] is DSCP d's priority; empty when unknown, 64 entries
-- when known), the DSCP and 802.1p priority the notification point marks
-- CNPs with, and the traffic class the RDMA device forces. NULL is unknown,
-- as mtu. Old rows read as unknown.
ALTER TABLE port_config
    ADD COLUMN dscp_prio Array(UInt8),
    ADD COLUMN cnp_dscp Nullable(UInt8),
    ADD COLUMN cnp_802p_prio Nullable(UInt8),
    ADD COLUMN traffic_class Nullable(UInt8);
