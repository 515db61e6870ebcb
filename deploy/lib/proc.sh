# Shared by the project's start scripts (deploy/clickhouse/local.sh,
# deploy/nats/server.sh, deploy/cluster/*.sh): processes are tracked by pid
# file and stopped by pid, never by name. Source it; it defines functions only.

# pidfile_pid FILE PATTERN: prints the pid FILE names when that process is
# alive and its command line matches PATTERN (an extended regexp), so a
# recycled pid is never taken for ours. Fails otherwise.
pidfile_pid() {
	local file=$1 pattern=$2 pid
	[[ -f $file ]] || return 1
	pid=$(<"$file")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -Eq -- "$pattern" || return 1
	fi
	echo "$pid"
}

# pidfile_stop FILE PATTERN [SIGNAL [SECONDS]]: sends SIGNAL (TERM) to the
# live process FILE names, waits up to SECONDS (30) for it to exit, then
# sends KILL; removes FILE. Prints the pid it stopped, nothing when none ran.
pidfile_stop() {
	local file=$1 pattern=$2 sig=${3:-TERM} secs=${4:-30} pid deadline
	if ! pid=$(pidfile_pid "$file" "$pattern"); then
		rm -f "$file"
		return 0
	fi
	kill "-$sig" "$pid" 2>/dev/null || true
	deadline=$((SECONDS + secs))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			echo "pid $pid still running after ${secs}s, sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		sleep 0.05
	done
	rm -f "$file"
	echo "$pid"
}

# build_nats_server BIN ROOT: builds nats-server from the module ROOT's
# go.mod pins into BIN when BIN is missing or older than go.mod.
build_nats_server() {
	local bin=$1 root=$2
	[[ -x $bin && $bin -nt $root/go.mod ]] && return 0
	command -v go >/dev/null 2>&1 || { echo "go is not on PATH: cannot build $bin" >&2; return 1; }
	echo "building $bin from the nats-server module in go.mod" >&2
	mkdir -p "$(dirname "$bin")"
	(cd "$root" && go build -o "$bin" github.com/nats-io/nats-server/v2) >&2
}
