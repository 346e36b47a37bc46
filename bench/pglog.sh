#!/usr/bin/env bash
# Counts, in PostgreSQL's own statement log, what a warm one-call turn
# sends the database: `toolgate serve` on a database of its own with
# log_statement = 'all', the fake Chat Completions model of bench/eino (one
# calculator call, then the answer, with usage), and sendMessage over HTTP.
# The statements between two markers (the turn's, and whatever the
# replica's timers sent meanwhile) are printed by frequency with their
# total, and then what the idle replica sends in a minute.
#
#   bench/pglog.sh            # needs Go, curl, psql, and read access to the server's log
#
# BENCH_POSTGRES (default postgres://postgres@127.0.0.1:5432) must be a
# superuser (log_statement is set on the database); PGLOG is the server's
# log file (default: Debian's for the running major version). The database
# (toolgate_pglog) is created at start and dropped at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
server=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432}
database=toolgate_pglog
major=$(psql -Atq "$server/postgres" -c "SHOW server_version_num" | cut -c1-2)
log=${PGLOG:-/var/log/postgresql/postgresql-$major-main.log}
idle=${IDLE_SECONDS:-60}
[ -r "$log" ] || { echo "cannot read the server's log $log (set PGLOG)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/toolgate" ./cmd/toolgate)
(cd "$here/eino" && go build -o "$work/eino" .)
psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database" \
	-c "ALTER DATABASE $database SET log_statement = 'all'" >/dev/null

"$work/eino" -fake-model >"$work/model.url" 2>"$work/model.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/model.url" ] && break; sleep 0.1; done
model=$(head -1 "$work/model.url")

port=$((20000 + RANDOM % 20000))
env -u TOOLGATE_DATABASE_URL OPENAI_BASE_URL="$model/v1" OPENAI_API_KEY=bench \
	"$work/toolgate" serve --demo --addr "127.0.0.1:$port" --database-url "$server/$database?sslmode=disable" \
	--model-provider openai --model gpt-4.1 --embedding-provider none --browser none \
	--rate-requests-per-second 0 --rate-turns-at-once 0 >"$work/server.log" 2>&1 &
pids+=($!)
token=
for _ in $(seq 300); do
	token=$(sed -n 's/.*demo token: \([^ ]*\).*/\1/p' "$work/server.log" | head -1)
	[ -n "$token" ] && curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break
	sleep 0.1
done
[ -n "$token" ] || { cat "$work/server.log" >&2; exit 1; }

gql() {
	curl -fs "http://127.0.0.1:$port/graphql" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$1"
}
id() { sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
agent=$(gql '{"query":"mutation { createAgent(input: {name: \"Sums\", instructions: \"Add.\", tools: []}) { id } }"}' | id)
conv=$(gql "{\"query\":\"mutation(\$a: ID!) { startConversation(input: {agentId: \$a}) { id } }\",\"variables\":{\"a\":\"$agent\"}}" | id)
send() { gql "{\"query\":\"mutation(\$c: ID!) { sendMessage(input: {conversationId: \$c, text: \\\"1+1?\\\"}) { id status } }\",\"variables\":{\"c\":\"$conv\"}}" >/dev/null; }
status() { gql "{\"query\":\"query(\$c: ID!) { node(id: \$c) { ... on Conversation { turns(last: 1) { nodes { status } } } } }\",\"variables\":{\"c\":\"$conv\"}}"; }
waitdone() { for _ in $(seq 200); do status | grep -q COMPLETED && [ "$(status | grep -c RUNNING)" = 0 ] && return; sleep 0.05; done; }

send && sleep 1 && waitdone # warms the caches
send && sleep 1 && waitdone
run=$$-$RANDOM # markers of this run only: the log holds earlier runs' too
mark() { psql -q "$server/$database" -c "SELECT 'toolgate-pglog-$run-$1'" >/dev/null; }
mark turn-start
send
sleep 1.5 # the turn, its events and its job's completion
mark turn-end
# between NAME: the statements the log holds between this run's markers
# NAME-start and NAME-end, the database's own, by frequency.
between() {
	awk -v db="$database" -v run="$run" -v name="$1" '
		$0 ~ "toolgate-pglog-" run "-" name "-start" { on = 1; next }
		$0 ~ "toolgate-pglog-" run "-" name "-end" { on = 0 }
		on && index($0, "@" db " ") && /LOG:  (statement|execute [^:]*):/ {
			sub(/.*LOG:  (statement|execute [^:]*): /, ""); print substr($0, 1, 110)
		}' "$log" | sort | uniq -c | sort -rn
}
total() { awk '{ n += $1 } END { print n + 0 }'; }

echo "one warm one-call turn, as PostgreSQL logged it (database $database):"
between turn
echo "$(between turn | total) statements in all"

mark idle-start
sleep "$idle"
mark idle-end
echo "the idle replica, $idle s:"
between idle
n=$(between idle | total)
echo "idle: $n statements in $idle s, $(awk -v n="$n" -v s="$idle" 'BEGIN { printf "%.2f", n / s }') a second, pings included"
