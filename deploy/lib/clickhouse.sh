# Shared by the scripts that start clickhouse-server processes
# (deploy/clickhouse/local.sh, deploy/cluster/clickhouse-cluster.sh). Source
# it; it defines variables only.

# clickhouse_malloc_conf is the jemalloc configuration (MALLOC_CONF) the
# servers start with. Debian's 18.16 links the system jemalloc, which by
# default hands memory freed for 10 s back to the kernel (dirty_decay_ms);
# under a steady stream of INSERTs every block's buffers are then faulted in
# anew, and on this project's 2-core machine that was half the server's CPU
# (BENCHMARKS.md section 13: `ingest --server-pid` server CPU per insert
# 3.28 s with the default, 1.31 s without the purge; a 10-minute decay
# left it at 3.19 s). Without the purge the server keeps the memory it
# peaked at, which its own max_memory_usage bounds. Set
# RDMAWATCH_CH_MALLOC_CONF to override (empty: jemalloc's defaults).
clickhouse_malloc_conf=${RDMAWATCH_CH_MALLOC_CONF-dirty_decay_ms:-1,muzzy_decay_ms:-1}
