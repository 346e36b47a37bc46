#!/usr/bin/env bash
# One-call turns side by side: toolgate (server, and PostgreSQL when asked)
# and an Eino ReAct agent, on the same zero-delay fake model. Prints the CPU
# per turn of each and their ratio. Extra arguments go to the bench
# (-turns, -warmup, -rounds, -idle).
#
#   bench/eino/run.sh sqlite -turns 500
#   bench/eino/run.sh postgres -turns 500
#
# Needs Go; for postgres, psql and a PostgreSQL whose user may create
# databases: BENCH_POSTGRES (default postgres://postgres@127.0.0.1:5432).
# The database (BENCH_DATABASE, default einobench) is created at start and
# dropped at the end; it must not exist. The PostgreSQL figure counts the
# backends of that database only, so other databases of the cluster may be
# in use meanwhile (they take CPU from the same cores, though).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
backend=${1:-}
case "$backend" in
sqlite | postgres) shift ;;
*)
	echo "usage: $0 sqlite|postgres [-turns N] [-warmup N] [-rounds N] [-idle D]" >&2
	exit 2
	;;
esac

work=$(mktemp -d)
created=
server=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432}
database=${BENCH_DATABASE:-einobench}
cleanup() {
	if [ -n "$created" ]; then
		psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $database" >/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "building toolgate and the bench..." >&2
(cd "$root" && go build -o "$work/toolgate" ./cmd/toolgate)
(cd "$here" && go build -o "$work/eino-bench" .)

args=(-toolgate "$work/toolgate")
if [ "$backend" = postgres ]; then
	psql -q "$server/postgres" -c "CREATE DATABASE $database" >/dev/null
	created=1
	args+=(-database-url "$server/$database?sslmode=disable")
fi
"$work/eino-bench" "${args[@]}" "$@"
