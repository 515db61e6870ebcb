# Shared by the scripts that start clickhouse-server processes
# (deploy/clickhouse/local.sh, deploy/cluster/clickhouse-cluster.sh). Source
# it; it defines variables only.

# clickhouse_malloc_conf is the jemalloc configuration (MALLOC_CONF) the
# servers start with. Debian's 18.16 links the system jemalloc, which by
# default purges memory freed for 10 s (dirty_decay_ms), and purges at once
# what an allocation over 8 MiB freed (its oversize arena): under a steady
# stream of INSERTs every block's buffers were faulted in anew, half of the
# server's CPU on this project's 2-core machine (clickhouse-allocator in
# BENCHMARKS.md).
# oversize_threshold:0 puts large allocations in the ordinary arenas, and
# a 60 s decay keeps what INSERTs reuse while still handing back what the
# server stops using. Purging off entirely (dirty_decay_ms:-1) was as fast
# but not bounded: the server grew with every benchmark run until the
# kernel's OOM killer stopped it at 18 GB. Current ClickHouse
# releases ship their own jemalloc with oversize_threshold:0 and 5 s decays.
# Set RDMAWATCH_CH_MALLOC_CONF to override (empty: jemalloc's defaults).
clickhouse_malloc_conf=${RDMAWATCH_CH_MALLOC_CONF-oversize_threshold:0,dirty_decay_ms:60000,muzzy_decay_ms:60000}
