// Package sim simulates an RDMA fabric (RoCE and InfiniBand hosts on a
// two-tier fat tree) and writes what rdmawatch reads: traces (trace format
// v1), the topology (topology format v1) and the ground truth of the faults
// it injected (labels format v1), as docs/formats.md defines them.
//
// Counters follow the hardware: PortCounters error counters saturate at
// 16/8/4 bits, hw_counters wrap at 32 bits, port_*_data counts 4-byte words,
// rx_bits_phy runs at the line rate. Traffic follows a noisy, slowly varying
// utilisation; background error rates are those of healthy links.
//
// What a RoCE port lists follows its driver (Config.NIC, nic.go): the full
// set (the zero value), an upstream 5.15/6.5 or MLNX_OFED 5.x mlx5 without
// rx_bits_phy ("mlx5-upstream"), or a fabric on IEEE 802.3x global pause
// ("global-pause": tx/rx_global_pause* instead of the per-priority pause
// counters, pfc_enabled []). Config.BondedHosts puts hosts on a RoCE LAG:
// an RDMA port mlx5_bond_<n> (netdev bond<n>) whose ethtool statistics are
// the sum over its members, and one sample per member netdev
// ("mlx5_bond_<n>.<netdev>") with its PHY statistics, as the collector
// publishes a bond. The physics is the same under every profile.
//
// Noise (read-time jitter, driver reloads, collector restarts, gaps,
// duplicated lines, read glitches, idle links, counters about to wrap) makes
// a trace look like production. Faults are small values behind the Fault
// interface (LinkFlap, CounterSaturated, BERDrift, PFCStorm,
// CNPECNImbalance); each changes port state tick by tick and reports its
// labels.
//
// NewFleet and Fleet.Step give the readings round by round (a live simulated
// fleet); Source (source.go) plays them as a collector.Source, for
// `rdmawatch run` and `rdmawatch collector --source sim`; Generate writes
// them through the trace package's writer. The same Config gives the same
// bytes. test/scenarios holds generated scenarios (see Scenarios); regenerate
// them with
//
//	go test ./sim -run TestScenarios -update
package sim
