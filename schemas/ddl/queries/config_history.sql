-- question: What was configured on a port at --from, and when did it change until --to? The settings in force at --from (with since when), then one row per change; unchanged refreshes are folded into seen_until. "unknown" means the host did not expose it, never off.
-- needs: node
-- filters: --device and --port narrow to one port; rows before --from are read to find what was in force then.
SELECT
    node,
    device,
    port,
    since,
    seen_until,
    netdev,
    mtu,
    pfc_enabled,
    ecn_np_enabled,
    ecn_rp_enabled,
    trust,
    change
FROM
(
    SELECT
        node,
        device,
        port,
        toDateTime(intDiv(tupleElement(h[since_i], 1), 1000)) AS since,
        toDateTime(intDiv(tupleElement(h[until_i], 1), 1000)) AS seen_until,
        tupleElement(e, 2) AS netdev,
        tupleElement(e, 3) AS mtu,
        tupleElement(e, 4) AS pfc_enabled,
        tupleElement(e, 5) AS ecn_np_enabled,
        tupleElement(e, 6) AS ecn_rp_enabled,
        tupleElement(e, 7) AS trust,
        multiIf(i = at_from, 'in force at --from', since_i = 1, 'first seen',
            arrayStringConcat(arrayFilter(x -> x != '', [
                if(tupleElement(e, 3) != tupleElement(h[i - 1], 3), concat('mtu ', tupleElement(h[i - 1], 3), ' -> ', tupleElement(e, 3)), ''),
                if(tupleElement(e, 4) != tupleElement(h[i - 1], 4), concat('pfc ', tupleElement(h[i - 1], 4), ' -> ', tupleElement(e, 4)), ''),
                if(tupleElement(e, 5) != tupleElement(h[i - 1], 5), concat('ecn_np ', tupleElement(h[i - 1], 5), ' -> ', tupleElement(e, 5)), ''),
                if(tupleElement(e, 6) != tupleElement(h[i - 1], 6), concat('ecn_rp ', tupleElement(h[i - 1], 6), ' -> ', tupleElement(e, 6)), ''),
                if(tupleElement(e, 7) != tupleElement(h[i - 1], 7), concat('trust ', tupleElement(h[i - 1], 7), ' -> ', tupleElement(e, 7)), '')
            ]), ', ')) AS change,
        arrayReduce('max', arrayFilter(j -> chg[j] AND j <= i, arrayEnumerate(h))) AS since_i,
        arrayFirstIndex(j -> chg[j] AND j > i, arrayEnumerate(h)) AS next_i,
        if(next_i = 0, toInt64(length(h)), next_i - 1) AS until_i
    FROM
    (
        SELECT
            node,
            device,
            port,
            arraySort(x -> tupleElement(x, 1), groupArray((time_ms, netdev, mtu_s, pfc_s, np_s, rp_s, trust_s))) AS h,
            arrayMap(j -> j = 1
                OR tupleElement(h[j], 3) != tupleElement(h[j - 1], 3)
                OR tupleElement(h[j], 4) != tupleElement(h[j - 1], 4)
                OR tupleElement(h[j], 5) != tupleElement(h[j - 1], 5)
                OR tupleElement(h[j], 6) != tupleElement(h[j - 1], 6)
                OR tupleElement(h[j], 7) != tupleElement(h[j - 1], 7), arrayEnumerate(h)) AS chg,
            arrayCount(x -> tupleElement(x, 1) < @from * 1000, h) AS at_from
        FROM
        (
            SELECT
                node,
                device,
                port,
                time_ms,
                netdev,
                ifNull(toString(mtu), 'unknown') AS mtu_s,
                if(pfc_known = 1, concat('[', arrayStringConcat(arrayMap(x -> toString(x), pfc_enabled), ','), ']'), 'unknown') AS pfc_s,
                if(ecn_np_known = 1, concat('[', arrayStringConcat(arrayMap(x -> toString(x), ecn_np_enabled), ','), ']'), 'unknown') AS np_s,
                if(ecn_rp_known = 1, concat('[', arrayStringConcat(arrayMap(x -> toString(x), ecn_rp_enabled), ','), ']'), 'unknown') AS rp_s,
                if(trust = '', 'unknown', trust) AS trust_s
            FROM port_config FINAL
            WHERE node = @node
              AND (@device = '' OR device = @device)
              AND (@port = 0 OR port = @port)
              AND time_ms < @to * 1000
              AND ts <= toDateTime(@to)
        )
        GROUP BY node, device, port
    )
    ARRAY JOIN
        h AS e,
        arrayEnumerate(h) AS i
    WHERE i = at_from OR (tupleElement(e, 1) >= @from * 1000 AND chg[i])
)
ORDER BY node, device, port, since
