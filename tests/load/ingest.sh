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
# shellcheck source=tests/load/lib.sh
. tests/load/lib.sh
trap 'stop_omrd; rm -rf "$work"' EXIT
target/release/examples/message_json omr-v1 > "$work/body.json"
start_omrd "$store" "$work"
echo "omrd at $http; wrk: 2 threads, $conns connections, ${secs}s (client and server share this machine)"
OMR_BODY_FILE="$work/body.json" wrk -t2 -c"$conns" -d"${secs}s" --latency -s tests/load/post.lua "http://$http/v1/messages"
curl -s "http://$http/metrics" | grep -E '^omr_(board_head|commit_messages_(sum|count)|commit_seconds_(sum|count))'
