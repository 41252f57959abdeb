#!/usr/bin/env bash
# Ingestion load test: start omrd (release build) on an ephemeral port with the chosen store,
# then drive POST /v1/messages (612-byte payloads, omr-v1 clues) with wrk.
#
#   tests/load/ingest.sh [sqlite|postgres] [connections] [seconds]
#   OMR_LOAD_LIMITS=off tests/load/ingest.sh …   # the same with the rate limits off
#   OMR_LOAD_OMRD=/tmp/omrd-old tests/load/ingest.sh …   # another build of omrd (an A/B)
#
# Rate limits stay on at omrd's defaults: omrd trusts 127.0.0.1 as a proxy and each request
# names one of OMR_LOAD_CLIENTS (default 65536) client addresses in X-Forwarded-For (post.lua),
# as real senders behind a load balancer would, so the limiter tracks that many clients.
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
export OMR_TRUSTED_PROXIES='["127.0.0.1"]'
if [ "${OMR_LOAD_LIMITS:-on}" = off ]; then
  export OMR_RATE_LIMIT_PER_SECOND=0 OMR_READ_RATE_LIMIT_PER_SECOND=0 OMR_DIGEST_RATE_LIMIT_PER_SECOND=0
fi
OMR_PARAM_SET=omr-v1 start_omrd "$store" "$work"
echo "omrd at $http; wrk: 2 threads, $conns connections, ${secs}s (client and server share this machine); rate limits ${OMR_LOAD_LIMITS:-on}, ${OMR_LOAD_CLIENTS:-65536} client addresses"
OMR_BODY_FILE="$work/body.json" wrk -t2 -c"$conns" -d"${secs}s" --latency -s tests/load/post.lua "http://$http/v1/messages"
curl -s "http://$http/metrics" | grep -E '^omr_(board_head|commit_messages_(sum|count)|commit_seconds_(sum|count)|rate_limited_total|requests_shed_total)'
