#!/usr/bin/env bash
# Ingestion load test: start omrd (release build) on an ephemeral port with the chosen store,
# then drive POST /v1/messages (612-byte payloads, omr-v1 clues) with wrk.
#
#   tests/load/ingest.sh [sqlite|postgres] [connections] [seconds]
#
# postgres uses a fresh database on $OMR_LOAD_POSTGRES_URL's server
# (default postgres://postgres@127.0.0.1:5432/postgres). Durable settings are the defaults:
# PostgreSQL synchronous_commit=on and fsync=on; SQLite WAL with synchronous=FULL.
set -euo pipefail
store="${1:-sqlite}"
conns="${2:-64}"
secs="${3:-20}"
cd "$(dirname "$0")/../.."

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release -q -p omr-server --bin omrd --example message_json

work="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; wait "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
target/release/examples/message_json omr-v1 > "$work/body.json"

args=(--http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" --log-format json)
if [ "$store" = postgres ]; then
  admin="${OMR_LOAD_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  db="omr_load_$(date +%s)_$$"
  psql "$admin" -qc "CREATE DATABASE $db"
  args+=(--database-url "${admin%/*}/$db")
  echo "store: PostgreSQL ($(psql "$admin" -tAc 'SHOW synchronous_commit') synchronous_commit, fsync $(psql "$admin" -tAc 'SHOW fsync'))"
else
  echo "store: SQLite (WAL, synchronous=FULL) under $work/data"
fi
RUST_LOG=warn target/release/omrd "${args[@]}" 2> "$work/omrd.log" &
pid=$!
for _ in $(seq 1 100); do [ -s "$work/data/omrd.addr" ] && break; sleep 0.1; done
http=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$work/data/omrd.addr")
echo "omrd at $http; wrk: 2 threads, $conns connections, ${secs}s (client and server share this machine)"
OMR_BODY_FILE="$work/body.json" wrk -t2 -c"$conns" -d"${secs}s" --latency -s tests/load/post.lua "http://$http/v1/messages"
curl -s "http://$http/metrics" | grep -E '^omr_(board_head|commit_messages_(sum|count)|commit_seconds_(sum|count))'
if [ "$store" = postgres ]; then
  kill "$pid"; wait "$pid" || true; pid=
  psql "$admin" -qc "DROP DATABASE $db"
fi
