#!/usr/bin/env bash
# A 3-node NATS JetStream cluster on 127.0.0.1 for tests and trials, built
# from the nats-server module pinned in go.mod.
#
#   deploy/cluster/nats-cluster.sh up            build if needed, start the nodes missing, wait for JetStream
#   deploy/cluster/nats-cluster.sh down          stop every node (SIGTERM by pid file, then SIGKILL)
#   deploy/cluster/nats-cluster.sh status        one line per node, exit 1 if any is down
#   deploy/cluster/nats-cluster.sh kill N        kill -9 node N (1..3), as a crash would
#   deploy/cluster/nats-cluster.sh start N       start node N again on its data dir
#   deploy/cluster/nats-cluster.sh urls          the client URLs, comma separated
#
# Environment: RDMAWATCH_CLUSTER_DIR (state: configs, data, logs, pid files;
# default .run/cluster in the checkout), NATS_CLUSTER_BASE_PORT (default
# 14950: clients on BASE+0..2, routes on BASE+10..12, monitoring on
# BASE+20..22).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib/proc.sh
source "$root/deploy/lib/proc.sh"
dir=${RDMAWATCH_CLUSTER_DIR:-$root/.run/cluster}
base=${NATS_CLUSTER_BASE_PORT:-14950}
bin=$root/bin/nats-server
nodes=(1 2 3)

client_port() { echo $((base + $1 - 1)); }
route_port() { echo $((base + 10 + $1 - 1)); }
http_port() { echo $((base + 20 + $1 - 1)); }
pidfile() { echo "$dir/nats-$1.pid"; }

build() { build_nats_server "$bin" "$root"; }

config() {
	local n=$1 routes="" m
	for m in "${nodes[@]}"; do
		routes+="    nats-route://127.0.0.1:$(route_port "$m")"$'\n'
	done
	mkdir -p "$dir/nats-$n"
	cat >"$dir/nats-$n.conf" <<EOF
server_name: n$n
listen: 127.0.0.1:$(client_port "$n")
http: 127.0.0.1:$(http_port "$n")
max_payload: 8MB
jetstream {
  store_dir: "$dir/nats-$n"
  max_memory_store: 256MB
  max_file_store: 4GB
}
cluster {
  name: rdmawatch
  listen: 127.0.0.1:$(route_port "$n")
  routes: [
$routes  ]
}
EOF
}

alive() { pidfile_pid "$(pidfile "$1")" nats-server >/dev/null; }

start() {
	local n=$1
	if alive "$n"; then
		return 0
	fi
	# Another server on our ports would answer the health check in our
	# place.
	if (exec 3<>"/dev/tcp/127.0.0.1/$(client_port "$n")") 2>/dev/null; then
		echo "something already listens on 127.0.0.1:$(client_port "$n") but $(pidfile "$n") names no running node" >&2
		exit 1
	fi
	config "$n"
	nohup "$bin" -c "$dir/nats-$n.conf" >>"$dir/nats-$n.log" 2>&1 &
	echo $! >"$(pidfile "$n")"
}

# wait_ready N: JetStream of node N answers its health check (it has joined
# the meta group and its streams are current).
wait_ready() {
	local n=$1 i
	for i in $(seq 1 150); do
		if curl -fsS "http://127.0.0.1:$(http_port "$n")/healthz" >/dev/null 2>&1; then
			return 0
		fi
		alive "$n" || { echo "node $n exited; see $dir/nats-$n.log" >&2; tail -5 "$dir/nats-$n.log" >&2; return 1; }
		sleep 0.2
	done
	echo "node $n not healthy after 30 s; see $dir/nats-$n.log" >&2
	return 1
}

stop() { pidfile_stop "$(pidfile "$1")" nats-server TERM 5 >/dev/null; }

urls() {
	local out="" n
	for n in "${nodes[@]}"; do
		out+="${out:+,}nats://127.0.0.1:$(client_port "$n")"
	done
	echo "$out"
}

node_arg() {
	[[ ${1:-} =~ ^[123]$ ]] || { echo "want a node number 1..3, got '${1:-}'" >&2; exit 2; }
	echo "$1"
}

mkdir -p "$dir"
case ${1:-} in
up)
	build
	for n in "${nodes[@]}"; do start "$n"; done
	for n in "${nodes[@]}"; do wait_ready "$n"; done
	urls
	;;
down)
	for n in "${nodes[@]}"; do stop "$n"; done
	;;
status)
	rc=0
	for n in "${nodes[@]}"; do
		if alive "$n"; then
			echo "n$n up pid $(cat "$(pidfile "$n")") nats://127.0.0.1:$(client_port "$n")"
		else
			echo "n$n down"
			rc=1
		fi
	done
	exit $rc
	;;
kill)
	n=$(node_arg "${2:-}")
	pf=$(pidfile "$n")
	[[ -f $pf ]] && kill -KILL "$(cat "$pf")" 2>/dev/null || true
	rm -f "$pf"
	;;
start)
	n=$(node_arg "${2:-}")
	build
	start "$n"
	wait_ready "$n"
	;;
urls)
	urls
	;;
*)
	echo "usage: $0 up|down|status|kill N|start N|urls" >&2
	exit 2
	;;
esac
