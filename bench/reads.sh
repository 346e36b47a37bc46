#!/usr/bin/env bash
# Reads side by side: toolgate and PostGraphile 4 serving one fresh
# PostgreSQL database, and toolgate-load -shapes reading a seeded
# conversation (100 turns × 5 calculator calls with stored results) in each
# of the transcript's shapes from both, and with plain SQL. Prints a table
# per shape and the ratios the goal is stated in. Extra arguments go to
# toolgate-load (-duration, -rounds, -clients...).
#
#   bench/reads.sh -duration 5s -rounds 3
#
# Needs Go, Node.js 20 with npm, psql, and a PostgreSQL whose user may
# create databases: BENCH_POSTGRES (default postgres://postgres@127.0.0.1:5432).
# The database (BENCH_DATABASE, default reads_bench) is created at start
# and dropped at the end; it must not exist.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
server=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432}
database=${BENCH_DATABASE:-reads_bench}
url="$server/$database?sslmode=disable"
toolgate_port=${BENCH_TOOLGATE_PORT:-18081}
postgraphile_port=${BENCH_POSTGRAPHILE_PORT:-18082}

work=$(mktemp -d)
pids=()
created=
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$created" ]; then
		psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $database" >/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# wait_for LOG CURL-ARGS...: until the request answers, or fail showing LOG.
wait_for() {
	log=$1
	shift
	for _ in $(seq 120); do
		if curl -fsS -o /dev/null "$@" 2>/dev/null; then
			return 0
		fi
		sleep 0.5
	done
	echo "reads.sh: $* did not answer; its log:" >&2
	cat "$log" >&2
	exit 1
}

echo "building toolgate and toolgate-load..." >&2
(cd "$root" && go build -o "$work/toolgate" ./cmd/toolgate && go build -o "$work/toolgate-load" ./cmd/toolgate-load)
if [ ! -d "$root/bench/postgraphile/node_modules" ]; then
	echo "installing PostGraphile (bench/postgraphile, from its lock file)..." >&2
	(cd "$root/bench/postgraphile" && npm ci --no-audit --no-fund >&2)
fi

psql -q "$server/postgres" -c "CREATE DATABASE $database" >/dev/null
created=1

# toolgate: its replay model plays 5 calculator calls a turn without a
# pause; no rate limit, since the load is one person's.
"$work/toolgate-load" -print-replay >"$work/replay.json"
(cd "$work" && exec ./toolgate serve --demo --addr "127.0.0.1:$toolgate_port" --database-url "$url" \
	--replay-script replay.json --replay-pace 0 --rate-requests-per-second 0 --rate-turns-at-once 0) \
	>"$work/toolgate.log" 2>&1 &
pids+=($!)
wait_for "$work/toolgate.log" "http://127.0.0.1:$toolgate_port/readyz"
token=$(sed -n 's/^ *demo token: \(tg_[A-Za-z0-9_-]*\).*/\1/p' "$work/toolgate.log" | head -1)
if [ -z "$token" ]; then
	echo "reads.sh: no demo token in toolgate's log:" >&2
	cat "$work/toolgate.log" >&2
	exit 1
fi

# PostGraphile on the tables toolgate just migrated: JSON columns as JSON,
# nested lists as plain lists, no query log.
(cd "$root/bench/postgraphile" && NODE_ENV=production exec node_modules/.bin/postgraphile -c "$url" --schema public \
	--host 127.0.0.1 --port "$postgraphile_port" --disable-graphiql --disable-query-log \
	--dynamic-json --simple-collections both) >"$work/postgraphile.log" 2>&1 &
pids+=($!)
wait_for "$work/postgraphile.log" -H 'Content-Type: application/json' -d '{"query":"{__typename}"}' \
	"http://127.0.0.1:$postgraphile_port/graphql"

"$work/toolgate-load" -shapes -url "http://127.0.0.1:$toolgate_port/graphql" -token "$token" \
	-postgraphile-url "http://127.0.0.1:$postgraphile_port/graphql" -database-url "$url" "$@"
