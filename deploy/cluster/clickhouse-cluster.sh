#!/usr/bin/env bash
# A ClickHouse cluster on 127.0.0.1 for tests and trials: one ZooKeeper
# (Debian's zookeeper package, installed with apt-get when missing and run
# as root) and two private clickhouse-server processes that are the two
# replicas of one shard. Nothing here touches a system service.
#
#   deploy/cluster/clickhouse-cluster.sh up        install ZooKeeper if needed, start what is not running, wait
#   deploy/cluster/clickhouse-cluster.sh down      stop everything (SIGTERM by pid file, SIGKILL after 30 s)
#   deploy/cluster/clickhouse-cluster.sh status    one line per process, exit 1 if any is down
#   deploy/cluster/clickhouse-cluster.sh kill N    kill -9 replica N (1 or 2), as a crash would
#   deploy/cluster/clickhouse-cluster.sh start N   start replica N again on its data
#   deploy/cluster/clickhouse-cluster.sh dsns      the replicas' DSNs, one a line
#
# `up` prints the cluster name, then one DSN per replica. Use them as
#   rdmawatch migrate --clickhouse DSN1 --cluster NAME
#   rdmawatch sink    --clickhouse DSN1 --cluster NAME
#
# Environment: RDMAWATCH_CLUSTER_DIR (configs, data, logs, pid files;
# default .run/cluster in the checkout), RDMAWATCH_CH_CLUSTER (cluster name,
# default rdmawatch), CH_CLUSTER_BASE_PORT (default 15000: ZooKeeper on
# BASE, replica N on BASE+10N (tcp), +1 (http), +2 (interserver)).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib/proc.sh
source "$root/deploy/lib/proc.sh"
# shellcheck source=../lib/clickhouse.sh
source "$root/deploy/lib/clickhouse.sh"
dir=${RDMAWATCH_CLUSTER_DIR:-$root/.run/cluster}
cluster=${RDMAWATCH_CH_CLUSTER:-rdmawatch}
base=${CH_CLUSTER_BASE_PORT:-15000}
zk_port=$base
replicas=(1 2)

[[ $cluster =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "RDMAWATCH_CH_CLUSTER=$cluster: letters, digits and _ only" >&2; exit 2; }

tcp_port() { echo $((base + 10 * $1)); }
http_port() { echo $((base + 10 * $1 + 1)); }
inter_port() { echo $((base + 10 * $1 + 2)); }

# alive NAME: the pid file names a live process whose command line holds
# the expected word (a recycled pid is never signalled).
alive() { pidfile_pid "$dir/$1.pid" "clickhouse|zookeeper" >/dev/null; }

stop() { pidfile_stop "$dir/$1.pid" "clickhouse|zookeeper" TERM 30 >/dev/null; }

install_zookeeper() {
	[[ -r /usr/share/java/zookeeper.jar ]] && return 0
	[[ $(id -u) -eq 0 ]] || { echo "ZooKeeper is not installed and this is not root: apt-get install zookeeper" >&2; exit 1; }
	echo "installing Debian's zookeeper" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper >&2; }
}

start_zookeeper() {
	alive zookeeper && return 0
	if (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null; then
		echo "something already listens on 127.0.0.1:$zk_port but $dir/zookeeper.pid names no running ZooKeeper" >&2
		exit 1
	fi
	mkdir -p "$dir/zookeeper/data" "$dir/zookeeper/conf"
	cat >"$dir/zookeeper/conf/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,stat
maxClientCnxns=200
EOF
	cat >"$dir/zookeeper/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$dir/zookeeper/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p %c{1}: %m%n
EOF
	(exec setsid java -Xmx256m -Dzookeeper.log.dir="$dir/zookeeper" \
		-cp "$dir/zookeeper/conf:/usr/share/java/zookeeper.jar" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zookeeper/conf/zoo.cfg" \
		>>"$dir/zookeeper/stdout.log" 2>&1 </dev/null) &
	echo $! >"$dir/zookeeper.pid"
}

# wait_zookeeper waits until ZooKeeper serves sessions. "ruok" answers imok
# as soon as the process runs, before it serves: a ClickHouse 18.16 started
# then has its session handshake closed, and its DDL worker dereferences the
# missing session and segfaults (seen in CI: TestClickHouseReplicaKilled's
# replica 1 died 0.4 s after start). "stat" names the server's mode only
# once it serves ("not currently serving requests" before).
wait_zookeeper() {
	local i reply
	for i in $(seq 1 150); do
		reply=$(exec 2>/dev/null; exec 3<>"/dev/tcp/127.0.0.1/$zk_port" && printf stat >&3 && timeout 2 cat <&3) || true
		[[ $reply == *"Mode: "* ]] && return 0
		alive zookeeper || { echo "ZooKeeper exited; see $dir/zookeeper" >&2; tail -20 "$dir/zookeeper/stdout.log" >&2; exit 1; }
		sleep 0.2
	done
	echo "ZooKeeper not answering after 30 s" >&2
	exit 1
}

config_replica() {
	local n=$1 d=$dir/ch-$1 r shards=""
	mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas" "$d/log"
	for r in "${replicas[@]}"; do
		shards+="                <replica><host>127.0.0.1</host><port>$(tcp_port "$r")</port></replica>"$'\n'
	done
	cp "$root/deploy/clickhouse/users-default.xml" "$d/users.xml"
	# <yandex> is the root 18.16 requires. internal_replication: a write
	# through the Distributed table goes to one replica and ZooKeeper
	# replication copies it, instead of the Distributed table writing every
	# replica itself (which would double rows whenever one insert is
	# retried).
	cat >"$d/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>$d/log/clickhouse-server.log</log>
        <errorlog>$d/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$(tcp_port "$n")</tcp_port>
    <http_port>$(http_port "$n")</http_port>
    <interserver_http_port>$(inter_port "$n")</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <path>$d/data/</path>
    <tmp_path>$d/tmp/</tmp_path>
    <user_files_path>$d/user_files/</user_files_path>
    <format_schema_path>$d/format_schemas/</format_schema_path>
    <users_config>$d/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>256</max_connections>
    <max_concurrent_queries>64</max_concurrent_queries>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mlock_executable>false</mlock_executable>
    <shutdown_wait_unfinished>1</shutdown_wait_unfinished>
    <remote_servers>
        <$cluster>
            <shard>
                <internal_replication>true</internal_replication>
$shards            </shard>
        </$cluster>
    </remote_servers>
    <zookeeper>
        <node><host>127.0.0.1</host><port>$zk_port</port></node>
        <session_timeout_ms>6000</session_timeout_ms>
    </zookeeper>
    <macros>
        <shard>01</shard>
        <replica>r$n</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
XML
}

start_replica() {
	local n=$1 d=$dir/ch-$1
	alive "ch-$n" && return 0
	if (exec 3<>"/dev/tcp/127.0.0.1/$(tcp_port "$n")") 2>/dev/null; then
		echo "something already listens on 127.0.0.1:$(tcp_port "$n") but $dir/ch-$n.pid names no running replica" >&2
		exit 1
	fi
	config_replica "$n"
	(cd "$d" && MALLOC_CONF=$clickhouse_malloc_conf exec setsid clickhouse-server --config-file="$d/config.xml" >>"$d/log/stdout.log" 2>&1 </dev/null) &
	echo $! >"$dir/ch-$n.pid"
}

# wait_replica waits until replica n answers and reaches ZooKeeper (a
# query of system.zookeeper): answering alone is not enough, a replica
# without its ZooKeeper session cannot create Replicated tables.
wait_replica() {
	local n=$1 i
	for i in $(seq 1 300); do
		if clickhouse-client --host 127.0.0.1 --port "$(tcp_port "$n")" --query "SELECT count() FROM system.zookeeper WHERE path = '/'" </dev/null >/dev/null 2>&1; then
			return 0
		fi
		alive "ch-$n" || { echo "replica $n exited; log tail:" >&2; tail -20 "$dir/ch-$n/log/clickhouse-server.err.log" "$dir/ch-$n/log/stdout.log" >&2 2>/dev/null; exit 1; }
		sleep 0.2
	done
	echo "replica $n not answering after 60 s" >&2
	exit 1
}

dsns() {
	local n
	for n in "${replicas[@]}"; do echo "clickhouse://127.0.0.1:$(tcp_port "$n")/default"; done
}

replica_arg() {
	[[ ${1:-} =~ ^[12]$ ]] || { echo "want a replica number 1 or 2, got '${1:-}'" >&2; exit 2; }
	echo "$1"
}

mkdir -p "$dir"
case ${1:-} in
up)
	install_zookeeper
	command -v clickhouse-server >/dev/null || { echo "no clickhouse-server on PATH (deploy/clickhouse/local.sh installs Debian's)" >&2; exit 1; }
	start_zookeeper
	wait_zookeeper
	for n in "${replicas[@]}"; do start_replica "$n"; done
	for n in "${replicas[@]}"; do wait_replica "$n"; done
	echo "$cluster"
	dsns
	;;
down)
	for n in "${replicas[@]}"; do stop "ch-$n"; done
	stop zookeeper
	;;
status)
	rc=0
	for name in zookeeper ch-1 ch-2; do
		if alive "$name"; then echo "$name up pid $(cat "$dir/$name.pid")"; else echo "$name down"; rc=1; fi
	done
	exit $rc
	;;
kill)
	n=$(replica_arg "${2:-}")
	alive "ch-$n" && kill -KILL "$(cat "$dir/ch-$n.pid")"
	rm -f "$dir/ch-$n.pid"
	;;
start)
	n=$(replica_arg "${2:-}")
	start_replica "$n"
	wait_replica "$n"
	;;
dsns)
	dsns
	;;
*)
	echo "usage: $0 up|down|status|kill N|start N|dsns" >&2
	exit 2
	;;
esac
