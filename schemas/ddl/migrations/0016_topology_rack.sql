-- The rack each host port's node stands in, from the topology's optional
-- "racks" (docs/formats.md, "Topology format v1"), so `rdmawatch query
-- trends --by rack` can group ports by rack. '' where the topology names no
-- rack for the node; rows loaded before this migration read as ''.
ALTER TABLE topology_ports
    ADD COLUMN rack String DEFAULT '';
