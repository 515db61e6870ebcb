-- question: What did one port do between --from and --to (use --event ID for the window around an incident)? One row per sample: throughput, utilisation, pause fractions, BERs, errors and CNPs.
-- needs: node
SELECT
    ts,
    node,
    device,
    port,
    state,
    round(rcv_gbps, 3) AS rcv_gbps,
    round(xmit_gbps, 3) AS xmit_gbps,
    round(utilisation, 4) AS utilisation,
    round(tx_pause_fraction, 4) AS tx_pause_fraction,
    round(rx_pause_fraction, 4) AS rx_pause_fraction,
    pre_fec_ber,
    post_fec_ber,
    symbol_ber,
    symbol_error,
    port_rcv_errors,
    port_xmit_discards,
    link_downed,
    np_ecn_marked_roce_packets AS ecn_marked,
    np_cnp_sent AS cnp_sent,
    rp_cnp_handled AS cnp_handled,
    out_of_sequence
FROM port_samples FINAL
WHERE node = @node
  AND (@device = '' OR device = @device)
  AND (@port = 0 OR port = @port)
  AND time_ms >= @from * 1000 AND time_ms < @to * 1000
  AND ts >= toDateTime(@from) AND ts <= toDateTime(@to)
ORDER BY node, device, port, time_ms
