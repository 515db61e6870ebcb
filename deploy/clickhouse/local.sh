#!/usr/bin/env bash
# local.sh up|down|status: a throwaway ClickHouse for development and tests.
#
# It never touches the system service: the server runs from a generated config
# on non-default ports with its data in a private folder, so it can run next to
# a system ClickHouse and next to other private ones (tests start their own
# with RDMAWATCH_CH_DIR and other ports).
#
#   RDMAWATCH_CH_TCP_PORT   native protocol port (default 19000)
#   RDMAWATCH_CH_HTTP_PORT  HTTP port (default 18123)
#   RDMAWATCH_CH_DIR        data, logs, config and pid file (default <repo>/.clickhouse)
#   RDMAWATCH_CH_CLUSTER    optional: also configure a one-node cluster of this
#                           name (remote_servers: this server) and the macros
#                           {shard}=01, {replica}=r1, for trying `migrate
#                           --cluster`'s DDL. There is no ZooKeeper, so ON
#                           CLUSTER and Replicated tables still fail here.
#   RDMAWATCH_CH_USERS      1: also create rdmawatch's users (rdmawatch-users.xml):
#                           rdmawatch_admin, rdmawatch_sink (no DDL) and
#                           rdmawatch_reader (read only), confined to the database
#                           RDMAWATCH_CH_DATABASE, with the passwords in
#                           RDMAWATCH_CH_ADMIN_PASSWORD, RDMAWATCH_CH_SINK_PASSWORD
#                           and RDMAWATCH_CH_READER_PASSWORD. grants: the same
#                           users from rdmawatch-users-grants.xml (ClickHouse 23.5
#                           or later only: 18.16 refuses them at login). The
#                           passwordless default user stays.
#   RDMAWATCH_CH_DATABASE   the database those users are confined to (default
#                           rdmawatch): the database of their DSNs.
#   RDMAWATCH_CH_TLS_PORT   optional: also listen for TLS (tcp_port_secure) on
#                           this port with RDMAWATCH_CH_TLS_CERT and
#                           RDMAWATCH_CH_TLS_KEY (PEM files); clients use
#                           ?secure=true and, for a private CA, --clickhouse-tls-ca.
#
# `up` prints the DSN as the last line of stdout.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
# shellcheck source=../lib/proc.sh
source "$script_dir/../lib/proc.sh"
# shellcheck source=../lib/clickhouse.sh
source "$script_dir/../lib/clickhouse.sh"

tcp_port=${RDMAWATCH_CH_TCP_PORT:-19000}
http_port=${RDMAWATCH_CH_HTTP_PORT:-18123}
dir=${RDMAWATCH_CH_DIR:-$repo_root/.clickhouse}
pid_file=$dir/clickhouse.pid
config=$dir/config.xml
log_dir=$dir/log
dsn="clickhouse://127.0.0.1:${tcp_port}/default"
cluster=${RDMAWATCH_CH_CLUSTER:-}
with_users=${RDMAWATCH_CH_USERS:-}
users_db=${RDMAWATCH_CH_DATABASE:-rdmawatch}
tls_port=${RDMAWATCH_CH_TLS_PORT:-}
start_timeout=${RDMAWATCH_CH_START_TIMEOUT:-60}

die() { echo "local.sh: $*" >&2; exit 1; }

# The users file RDMAWATCH_CH_USERS asks for; checked before anything starts.
users_file=
case $with_users in
'' | 0) with_users= ;;
1) users_file=$script_dir/rdmawatch-users.xml ;;
grants) users_file=$script_dir/rdmawatch-users-grants.xml ;;
*) die "RDMAWATCH_CH_USERS=$with_users: 1 (rdmawatch-users.xml) or grants (rdmawatch-users-grants.xml)" ;;
esac
# The name goes into XML and GRANT statements: a plain identifier only.
if [[ -n $with_users && ! $users_db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
	die "RDMAWATCH_CH_DATABASE=$users_db: letters, digits and '_' only, not starting with a digit"
fi

# server_cmd / client_cmd: the single `clickhouse` binary (current releases)
# or Debian's split clickhouse-server / clickhouse-client (18.16).
server_cmd=()
client_cmd=()
find_binaries() {
	server_cmd=()
	client_cmd=()
	if command -v clickhouse >/dev/null 2>&1; then
		server_cmd=(clickhouse server)
		client_cmd=(clickhouse client)
	elif command -v clickhouse-server >/dev/null 2>&1; then
		server_cmd=(clickhouse-server)
		if command -v clickhouse-client >/dev/null 2>&1; then
			client_cmd=(clickhouse-client)
		fi
	fi
}

install_server() {
	if [[ -r /etc/debian_version && $(id -u) -eq 0 ]]; then
		echo "local.sh: no clickhouse binary; installing Debian's clickhouse-server" >&2
		apt-get update >&2
		# The postinst may try to start the system service and fail; that is
		# harmless because we never use it, so only the binary matters.
		DEBIAN_FRONTEND=noninteractive apt-get install -y clickhouse-server >&2 || true
		find_binaries
		[[ ${#server_cmd[@]} -gt 0 ]] || die "apt-get install clickhouse-server did not provide a server binary"
	else
		die "no clickhouse or clickhouse-server on PATH (install ClickHouse, or run as root on Debian to have it installed)"
	fi
}

# running: the pid file names a live ClickHouse process. The command line is
# checked so a recycled pid never makes us report (or kill) another process.
running_pid() { pidfile_pid "$pid_file" clickhouse; }

answers() {
	if [[ ${#client_cmd[@]} -gt 0 ]]; then
		"${client_cmd[@]}" --host 127.0.0.1 --port "$tcp_port" --query 'SELECT 1' </dev/null >/dev/null 2>&1
		return
	fi
	# No client binary: ask the HTTP /ping endpoint with bash's /dev/tcp.
	local reply
	reply=$(
		exec 2>/dev/null
		exec 3<>"/dev/tcp/127.0.0.1/$http_port" || exit 1
		printf 'GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		timeout 2 cat <&3
	) || return 1
	[[ $reply == *"Ok."* ]]
}

write_config() {
	mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$log_dir"
	local users=/etc/clickhouse-server/users.xml
	# Our own users.xml when rdmawatch's users are asked for: the server
	# merges users.d/ next to the users file it is given.
	if [[ ! -r $users || -n $with_users ]]; then
		users=$dir/users.xml
		cp "$script_dir/users-default.xml" "$users"
	fi
	# <yandex> is the root 18.16 requires; current releases still accept it.
	# No interserver, MySQL, PostgreSQL or HTTPS ports are configured, so two
	# private servers only need distinct tcp and http ports.
	cat >"$config" <<XML
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>$log_dir/clickhouse-server.log</log>
        <errorlog>$log_dir/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$tcp_port</tcp_port>
    <http_port>$http_port</http_port>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$users</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>256</max_connections>
    <max_concurrent_queries>64</max_concurrent_queries>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mlock_executable>false</mlock_executable>
    <!-- A throwaway server: stop without waiting 5s for running queries.
         (Idle client connections still hold shutdown up to the profile's
         poll_interval, 10s by default.) -->
    <shutdown_wait_unfinished>1</shutdown_wait_unfinished>
</yandex>
XML
	rm -rf "$dir/users.d"
	if [[ -n $with_users ]]; then
		local admin=${RDMAWATCH_CH_ADMIN_PASSWORD:?RDMAWATCH_CH_USERS needs RDMAWATCH_CH_ADMIN_PASSWORD}
		local sink=${RDMAWATCH_CH_SINK_PASSWORD:?RDMAWATCH_CH_USERS needs RDMAWATCH_CH_SINK_PASSWORD}
		local reader=${RDMAWATCH_CH_READER_PASSWORD:?RDMAWATCH_CH_USERS needs RDMAWATCH_CH_READER_PASSWORD}
		mkdir -p "$dir/users.d"
		sed -e "s/@ADMIN_SHA256@/$(sha256_hex "$admin")/" \
			-e "s/@SINK_SHA256@/$(sha256_hex "$sink")/" \
			-e "s/@READER_SHA256@/$(sha256_hex "$reader")/" \
			-e "s/@DATABASE@/$users_db/g" \
			"$users_file" >"$dir/users.d/rdmawatch-users.xml"
	fi
	# The server merges config.d/*.xml next to its config file.
	local cluster_xml=$dir/config.d/rdmawatch-cluster.xml
	rm -f "$cluster_xml"
	if [[ -n $cluster ]]; then
		[[ $cluster =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "RDMAWATCH_CH_CLUSTER=$cluster: letters, digits and '_' only"
		mkdir -p "$dir/config.d"
		cat >"$cluster_xml" <<XML
<?xml version="1.0"?>
<yandex>
    <remote_servers>
        <$cluster>
            <shard><replica><host>127.0.0.1</host><port>$tcp_port</port></replica></shard>
        </$cluster>
    </remote_servers>
    <macros>
        <shard>01</shard>
        <replica>r1</replica>
    </macros>
</yandex>
XML
	fi
	local tls_xml=$dir/config.d/rdmawatch-tls.xml
	rm -f "$tls_xml"
	if [[ -n $tls_port ]]; then
		[[ -r ${RDMAWATCH_CH_TLS_CERT:-} && -r ${RDMAWATCH_CH_TLS_KEY:-} ]] ||
			die "RDMAWATCH_CH_TLS_PORT needs readable RDMAWATCH_CH_TLS_CERT and RDMAWATCH_CH_TLS_KEY"
		mkdir -p "$dir/config.d"
		cat >"$tls_xml" <<XML
<?xml version="1.0"?>
<yandex>
    <tcp_port_secure>$tls_port</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>$RDMAWATCH_CH_TLS_CERT</certificateFile>
            <privateKeyFile>$RDMAWATCH_CH_TLS_KEY</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>
</yandex>
XML
	fi
}

sha256_hex() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# running_dsn is the DSN of the server the pid file names, from its own
# config: the port variables of this call may differ from the ones it was
# started with.
running_dsn() {
	local port
	port=$(sed -n 's:.*<tcp_port>\([0-9]*\)</tcp_port>.*:\1:p' "$config" 2>/dev/null | head -n1)
	echo "clickhouse://127.0.0.1:${port:-$tcp_port}/default"
}

cmd_up() {
	if running_pid >/dev/null; then
		running_dsn
		return
	fi
	rm -f "$pid_file"
	find_binaries
	[[ ${#server_cmd[@]} -gt 0 ]] || install_server
	# Another server on our port would answer the readiness check in our
	# place: refuse instead of reporting its DSN as ours.
	if answers; then
		die "something already answers on 127.0.0.1:$tcp_port (http $http_port) but $pid_file names no running server; stop it or choose other ports (RDMAWATCH_CH_TCP_PORT, RDMAWATCH_CH_HTTP_PORT)"
	fi
	write_config
	echo "local.sh: starting ${server_cmd[*]} on 127.0.0.1:$tcp_port (http $http_port), data in $dir" >&2
	# setsid detaches the server from this shell's session so it outlives it;
	# without job control the background child is not a group leader, so
	# setsid execs in place and $! is the server's own pid.
	(cd "$dir" && MALLOC_CONF=$clickhouse_malloc_conf exec setsid "${server_cmd[@]}" --config-file="$config" \
		>>"$log_dir/stdout.log" 2>&1 </dev/null) &
	local pid=$!
	echo "$pid" >"$pid_file"
	local deadline=$((SECONDS + start_timeout))
	until answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$pid_file"
			echo "local.sh: clickhouse exited during start; log tail:" >&2
			tail -n 30 "$log_dir/clickhouse-server.err.log" "$log_dir/stdout.log" >&2 2>/dev/null || true
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			echo "local.sh: clickhouse did not answer within ${start_timeout}s; log tail:" >&2
			tail -n 30 "$log_dir/clickhouse-server.log" "$log_dir/stdout.log" >&2 2>/dev/null || true
			exit 1
		fi
		sleep 0.2
	done
	kill -0 "$pid" 2>/dev/null || die "clickhouse pid $pid exited right after answering; see $log_dir"
	echo "$dsn"
}

cmd_down() {
	local pid
	pid=$(pidfile_stop "$pid_file" clickhouse TERM 30)
	if [[ -z $pid ]]; then
		echo "local.sh: not running ($dir)" >&2
		return
	fi
	echo "local.sh: stopped pid $pid" >&2
}

cmd_status() {
	local pid
	if pid=$(running_pid); then
		echo "running pid $pid $(running_dsn)"
		return 0
	fi
	echo "not running ($dir)"
	return 1
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*) die "usage: $0 up|down|status" ;;
esac
