package sysfstest

import (
	"fmt"
	"strconv"
)

// mlx5PortCounters are the files of ports/<p>/counters on an mlx5 RoCE port
// (kernel 5.x/6.x, ConnectX-5/6).
var mlx5PortCounters = []string{
	"VL15_dropped",
	"excessive_buffer_overrun_errors",
	"link_downed",
	"link_error_recovery",
	"local_link_integrity_errors",
	"multicast_rcv_packets",
	"multicast_xmit_packets",
	"port_rcv_constraint_errors",
	"port_rcv_data",
	"port_rcv_errors",
	"port_rcv_packets",
	"port_rcv_remote_physical_errors",
	"port_rcv_switch_relay_errors",
	"port_xmit_constraint_errors",
	"port_xmit_data",
	"port_xmit_discards",
	"port_xmit_packets",
	"port_xmit_wait",
	"symbol_error",
	"unicast_rcv_packets",
	"unicast_xmit_packets",
}

// mlx5RoCEHWCounters are the files of ports/<p>/hw_counters on an mlx5 RoCE
// port: q-counters, the np_*/rp_* congestion (DCQCN) counters that only
// Ethernet ports have, and lifespan, which is a setting in ms.
var mlx5RoCEHWCounters = []string{
	"duplicate_request",
	"implied_nak_seq_err",
	"lifespan",
	"local_ack_timeout_err",
	"np_cnp_sent",
	"np_ecn_marked_roce_packets",
	"out_of_buffer",
	"out_of_sequence",
	"packet_seq_err",
	"req_cqe_error",
	"req_cqe_flush_error",
	"req_remote_access_errors",
	"req_remote_invalid_request",
	"req_rnr_retries_exceeded",
	"req_transport_retries_exceeded",
	"resp_cqe_error",
	"resp_cqe_flush_error",
	"resp_local_length_error",
	"resp_remote_access_errors",
	"rnr_nak_retry_err",
	"roce_adp_retrans",
	"roce_adp_retrans_to",
	"roce_slow_restart",
	"roce_slow_restart_cnps",
	"roce_slow_restart_trans",
	"rp_cnp_handled",
	"rp_cnp_ignored",
	"rx_atomic_requests",
	"rx_dct_connect",
	"rx_icrc_encapsulated",
	"rx_read_requests",
	"rx_write_requests",
}

// MLX5RoCE returns an mlx5-like RoCE spec: devices mlx5_0..mlx5_<n-1>, each
// with ports 1..ports, ACTIVE at 200 Gb/s, full counter sets with
// deterministic, distinct values, and a netdev per port
// (ens<d+1>f<p-1>np<p-1>) in gid_attrs/ndevs/0 and 1 (the two default GIDs,
// RoCE v1 and v2). Benchmarks use MLX5RoCE(8, 2).
func MLX5RoCE(devices, ports int) Spec {
	var spec Spec
	for d := range devices {
		dev := Device{
			Name: fmt.Sprintf("mlx5_%d", d),
			Files: map[string]string{
				"fw_ver":    "22.36.1010",
				"board_id":  "MT_0000000359",
				"hca_type":  "MT4125",
				"node_guid": fmt.Sprintf("b8ce:f603:00a1:%04x", d),
				"node_type": "1: CA",
			},
		}
		for p := 1; p <= ports; p++ {
			netdev := fmt.Sprintf("ens%df%dnp%d", d+1, p-1, p-1)
			port := Port{
				Num: p,
				Files: map[string]string{
					"state":      "4: ACTIVE",
					"phys_state": "5: LinkUp",
					"rate":       "200 Gb/sec (4X HDR)",
					"link_layer": "Ethernet",
				},
				Counters:   make(map[string]string, len(mlx5PortCounters)),
				HWCounters: make(map[string]string, len(mlx5RoCEHWCounters)),
				Netdevs:    []string{netdev, netdev},
			}
			// Distinct values per device, port and counter, so a mixed-up
			// map shows in a test; errors stay small, traffic large.
			base := uint64(d*1000 + p*100)
			for i, name := range mlx5PortCounters {
				v := base + uint64(i)
				switch name {
				case "port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets",
					"unicast_rcv_packets", "unicast_xmit_packets":
					v = v*1_000_003 + 7
				}
				port.Counters[name] = strconv.FormatUint(v, 10)
			}
			for i, name := range mlx5RoCEHWCounters {
				v := base + uint64(i)
				if name == "lifespan" {
					v = 10
				}
				port.HWCounters[name] = strconv.FormatUint(v, 10)
			}
			dev.Ports = append(dev.Ports, port)
		}
		spec.Devices = append(spec.Devices, dev)
	}
	return spec
}
