-- question: Which links' bit error rate rises fastest? Per port over --from..--to, from the minute rollup: BER per minute (pre-FEC on Ethernet, over rx_bits_phy or the link rate where the NIC does not list it; symbol BER over line bits on InfiniBand), its fitted slope per hour, first and last minute's BER and the worst minute; steepest first (--limit rows).
SELECT
    node,
    device,
    port,
    link_layer,
    count() AS minutes,
    covarPop(t, ber) / varPop(t) * 3600 AS ber_slope_per_hour,
    argMin(ber, t) AS ber_first,
    argMax(ber, t) AS ber_last,
    max(ber) AS ber_max
FROM
(
    SELECT
        node,
        device,
        port,
        -- seconds since --from, not since 1970: covarPop/varPop over
        -- values near 1.7e9 lose most digits to cancellation (18.16 and
        -- 26.x then disagree by 1%); the slope is the same either way.
        toFloat64(toInt64(toUInt32(minute)) - toInt64(toUInt32(toStartOfMinute(toDateTime(@from))))) AS t,
        anyLastMerge(link_layer) AS link_layer,
        if(link_layer = 'InfiniBand',
           if(maxMerge(rate_gbps) * sumMerge(interval_ms) > 0, sumMerge(symbol_error) / (maxMerge(rate_gbps) * 1e6 * sumMerge(interval_ms)), 0),
           -- Ethernet: corrected bits over rx_bits_phy, or over the link
           -- rate times the time where the NIC does not list rx_bits_phy
           -- (upstream mlx5 before 2026, MLNX_OFED 5.x), as
           -- schemas.EthernetPHYBits measures it.
           if(sumMerge(rx_bits_phy) > 0, sumMerge(rx_corrected_bits_phy) / sumMerge(rx_bits_phy),
              if(maxMerge(rate_gbps) * sumMerge(interval_ms) > 0, sumMerge(rx_corrected_bits_phy) / (maxMerge(rate_gbps) * 1e6 * sumMerge(interval_ms)), 0))) AS ber
    FROM rollup_minute FINAL
    WHERE minute >= toStartOfMinute(toDateTime(@from)) AND minute < toDateTime(@to)
      AND (@node = '' OR node = @node)
      AND (@device = '' OR device = @device)
      AND (@port = 0 OR port = @port)
    GROUP BY node, device, port, minute
)
GROUP BY node, device, port, link_layer
HAVING minutes >= 2 AND ber_max > 0
ORDER BY ber_slope_per_hour DESC, ber_max DESC, node, device, port
LIMIT @limit
