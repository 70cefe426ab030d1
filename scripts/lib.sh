# scripts/lib.sh: shell helpers shared by test/run, scripts/demo and bench/.
# Source it; it defines functions only.

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG_BINDIR=$("$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)

# sw_sudo CMD...: run as root, through sudo when we are not root
sw_sudo() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# sw_build: build and install the extension, and build the broker, the
# tests' schema registry and their Avro producer
sw_build() {
	make -s PG_CONFIG="$PG_CONFIG" &&
		sw_sudo make -s PG_CONFIG="$PG_CONFIG" install &&
		make -s PG_CONFIG="$PG_CONFIG" test/kafka_broker test/schema_registry \
			test/avro_producer
}

# sw_pick_user NAME: set SW_USER to the unprivileged user that runs servers
# (initdb and postgres refuse root): NAME, created if needed, when we are
# root, else ourselves.
sw_pick_user() {
	if [ "$(id -u)" -eq 0 ]; then
		SW_USER=$1
		id "$SW_USER" >/dev/null 2>&1 ||
			useradd --system --no-create-home --shell /usr/sbin/nologin "$SW_USER"
	else
		SW_USER=$(id -un)
	fi
}

# sw_as_user CMD...: run a command as SW_USER.  As another user it runs in
# /, because our current directory may be one SW_USER cannot enter (a clone
# under /root): initdb and pg_ctl complain there, and anything relative
# would fail.  So every path in CMD must be absolute, and reachable by
# SW_USER.
sw_as_user() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u "$SW_USER" -- "$@")
	else
		"$@"
	fi
}

# sw_check_reachable DIR: fail, saying why, unless SW_USER can enter and
# write DIR (it holds what SW_USER runs and writes)
sw_check_reachable() {
	local dir=$1
	if ! sw_as_user test -d "$dir" -a -x "$dir" -a -w "$dir"; then
		echo "$SW_USER cannot enter or write $dir (each directory above it" \
			"must be open to it): use a directory under /tmp" >&2
		return 1
	fi
}

# sw_start_tool DIR NAME: start test/NAME (built in this tree) as SW_USER,
# from a copy in DIR (SW_USER may not reach this tree), its log in
# DIR/NAME.log, and wait for the file DIR/NAME.ready it writes once it
# serves
sw_start_tool() {
	local dir=$1 name=$2 i
	sw_check_reachable "$dir" || return 1
	install -m 755 "test/$name" "$dir/$name" || return 1
	rm -f "$dir/$name.ready"
	sw_as_user "$dir/$name" --ready-file "$dir/$name.ready" \
		>"$dir/$name.log" 2>&1 &
	for i in $(seq 1 100); do
		[ -s "$dir/$name.ready" ] && return 0
		sleep 0.1
	done
	echo "test/$name did not start:" >&2
	cat "$dir/$name.log" >&2
	return 1
}

# sw_start_broker DIR: start the embedded Kafka broker with its files in
# DIR and set SW_BROKERS (bootstrap address), SW_BROKER_CONTROL (control
# address) and SW_BROKER_PID
sw_start_broker() {
	sw_start_tool "$1" kafka_broker || return 1
	SW_BROKERS=$(sed -n 's/^bootstrap=//p' "$1/kafka_broker.ready")
	SW_BROKER_CONTROL=$(sed -n 's/^control=//p' "$1/kafka_broker.ready")
	SW_BROKER_PID=$(sed -n 's/^pid=//p' "$1/kafka_broker.ready")
	export SW_BROKERS SW_BROKER_CONTROL SW_BROKER_PID
}

# sw_start_registry DIR: start the tests' schema registry with its files
# in DIR and set SW_REGISTRY (its URL)
sw_start_registry() {
	sw_start_tool "$1" schema_registry || return 1
	SW_REGISTRY=$(sed -n 's/^url=//p' "$1/schema_registry.ready")
	export SW_REGISTRY
}

# sw_stop_processes DIR: stop every process whose command line names DIR
# (servers with data directories there, the broker), politely first
sw_stop_processes() {
	local dir=$1 i
	pkill -TERM -f -- "$dir" 2>/dev/null
	for i in $(seq 1 50); do
		pgrep -f -- "$dir" >/dev/null || return 0
		sleep 0.2
	done
	pkill -KILL -f -- "$dir" 2>/dev/null
	sleep 0.5
	! pgrep -f -- "$dir" >/dev/null
}

# sw_free_port N: the first TCP port on loopback from N up that nobody uses
sw_free_port() {
	local port=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done
	echo "$port"
}

# sw_start_cluster DIR PORT [CONF]: initdb a throwaway cluster in DIR/data
# owned by SW_USER (superuser "postgres", trust on its socket in DIR only),
# append CONF to postgresql.conf, start it
sw_start_cluster() {
	local dir=$1 port=$2 conf=${3:-}
	mkdir -p "$dir"
	chown "$SW_USER" "$dir"
	sw_check_reachable "$dir" || return 1
	sw_as_user "$PG_BINDIR/initdb" -D "$dir/data" -U postgres -A trust \
		>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
	cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'source_writes'
$conf
CONF
	sw_as_user "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
		>/dev/null || { cat "$dir/server.log" >&2; return 1; }
}

# sw_stop_cluster DIR: stop the cluster in DIR/data, if it runs
sw_stop_cluster() {
	local dir=$1
	if [ -f "$dir/data/postmaster.pid" ]; then
		sw_as_user "$PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	fi
}
