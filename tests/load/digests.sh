#!/usr/bin/env bash
# Digest load test: many recipients come online at once while senders keep posting.
#
#   tests/load/digests.sh            # defaults below; settings are environment variables
#   OMR_LOAD_KEYS=16 OMR_LOAD_SECONDS=60 tests/load/digests.sh
#   OMR_LOAD_LIMITS=off tests/load/digests.sh     # the same with the rate limits off
#
# 1. builds and starts omrd (release) on ephemeral ports, SQLite by default
#    (OMR_LOAD_STORE=postgres: a fresh database on $OMR_LOAD_POSTGRES_URL's server);
# 2. generates OMR_LOAD_KEYS recipients' omr-v1 keys (k̄ = OMR_LOAD_KBAR) with `omr keygen` and
#    registers them with `omr register` from board index 0;
# 3. posts a board of OMR_LOAD_BOARD messages with `omr send`, OMR_LOAD_PER_KEY to each
#    recipient and the rest to an outsider, waits until every key has detected it, and checks
#    one recipient's `omr digest` returns exactly its messages;
# 4. keeps posting OMR_LOAD_INGEST_RATE messages/s in the background (so keys' cursors move,
#    accumulators are rewritten and cached digests go stale, as in production) and drives
#    GET /v1/digests/{key} with wrk: OMR_LOAD_CONNECTIONS connections, OMR_LOAD_SECONDS seconds,
#    round-robin over all keys, each request with its own key's token;
# 5. writes a JSON report to target/load/ and prints it: requests/s, p50/p90/p95/p99/max
#    latency, errors (connect/read/write/timeout/non-200), digest bytes, messages ingested and
#    detected meanwhile. Exits 1 on any error or if the check in step 3 fails.
#
# omrd runs with OMR_LOAD_WORKER_THREADS detection threads (default 1: on this 2-core machine
# one core detects and one serves; see docs/load-test.md). Client and server share the machine.
#
# Rate limits stay on at omrd's defaults: omrd trusts 127.0.0.1 as a proxy, and the digest
# requests and the background posts each name one of OMR_LOAD_CLIENTS (default 65536) client
# addresses in X-Forwarded-For, as recipients and senders behind a load balancer would. The
# setup's `omr` commands come from 127.0.0.1 itself (the board fits in one posting burst).
set -euo pipefail
cd "$(dirname "$0")/../.."

nkeys="${OMR_LOAD_KEYS:-8}"
kbar="${OMR_LOAD_KBAR:-50}"
board="${OMR_LOAD_BOARD:-48}"
per_key="${OMR_LOAD_PER_KEY:-3}"
secs="${OMR_LOAD_SECONDS:-30}"
conns="${OMR_LOAD_CONNECTIONS:-32}"
wrk_threads="${OMR_LOAD_WRK_THREADS:-2}"
ingest_rate="${OMR_LOAD_INGEST_RATE:-2}"
worker_threads="${OMR_LOAD_WORKER_THREADS:-1}"
store="${OMR_LOAD_STORE:-sqlite}"

if [ $((nkeys * per_key)) -gt "$board" ]; then
  echo "OMR_LOAD_KEYS × OMR_LOAD_PER_KEY ($((nkeys * per_key))) exceeds OMR_LOAD_BOARD ($board)" >&2
  exit 2
fi
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
echo "building omrd and omr (release)…"
cargo build --release -q -p omr-server --bin omrd --example message_json -p omr-cli --bin omr
omr=target/release/omr

work="$(mktemp -d)"
ingest_pid=
# shellcheck source=tests/load/lib.sh
. tests/load/lib.sh
cleanup() {
  [ -n "$ingest_pid" ] && kill "$ingest_pid" 2>/dev/null
  stop_omrd
  rm -rf "$work"
}
trap cleanup EXIT
clients="${OMR_LOAD_CLIENTS:-65536}"
if [ "${OMR_LOAD_LIMITS:-on}" = off ]; then
  export OMR_RATE_LIMIT_PER_SECOND=0 OMR_READ_RATE_LIMIT_PER_SECOND=0 OMR_DIGEST_RATE_LIMIT_PER_SECOND=0
fi
OMR_PARAM_SET=omr-v1 OMR_TRUSTED_PROXIES='["127.0.0.1"]' OMR_WORKER_THREADS="$worker_threads" start_omrd "$store" "$work"
servers=(--http "http://$http" --grpc "http://$grpc")
echo "omrd at $http (HTTP) / $grpc (gRPC), store $store, $worker_threads detection thread(s)"

t0=$(date +%s)
echo "generating $nkeys recipients' keys and an outsider's (omr-v1, k̄ = $kbar)…"
seq 0 "$nkeys" | xargs -P 2 -I{} "$omr" keygen --param-set omr-v1 --out "$work/keys/r{}" --kbar "$kbar" --json -q > /dev/null
echo "registering $nkeys detection keys…"
for i in $(seq 1 "$nkeys"); do
  "$omr" register --keys "$work/keys/r$i" "${servers[@]}" --start-index 0 --json -q > /dev/null
done
echo "posting $board messages ($per_key to each recipient)…"
for j in $(seq 0 $((board - 1))); do
  if [ "$j" -lt $((nkeys * per_key)) ]; then to="r$((j % nkeys + 1))"; else to=r0; fi
  "$omr" send --to "$work/keys/$to/address" --message "load test message $j for $to" "${servers[@]}" > /dev/null
done
echo "waiting for detection of $((nkeys * board)) (message, key) pairs…"
while :; do
  lag=0
  for i in $(seq 1 "$nkeys"); do
    l=$("$omr" status --keys "$work/keys/r$i" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["lag"])')
    lag=$((lag + l))
  done
  [ "$lag" -eq 0 ] && break
  sleep 1
done
setup_secs=$(( $(date +%s) - t0 ))
got=$("$omr" digest --keys "$work/keys/r1" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["messages"]))')
if [ "$got" -ne "$per_key" ]; then
  echo "check failed: recipient 1 retrieved $got messages, $per_key were sent" >&2
  exit 1
fi
echo "setup done in ${setup_secs}s; recipient 1 retrieved its $got messages"

for i in $(seq 1 "$nkeys"); do
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["key_id"], r["access_token"])' \
    "$work/keys/r$i/registration.json"
done > "$work/keys.txt"

metric() { curl -s "http://$http/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
head0=$(metric omr_board_head); det0=$(metric omr_detections_total)

target/release/examples/message_json omr-v1 > "$work/body.json"
interval=$(python3 -c "print(1 / $ingest_rate)")
(
  while :; do
    c=$((RANDOM * 32768 + RANDOM))
    curl -s -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' \
      -H "x-forwarded-for: 198.$((18 + c / 65536 % 2)).$((c / 256 % 256)).$((c % 256))" \
      --data-binary @"$work/body.json" "http://$http/v1/messages"
    sleep "$interval"
  done > "$work/ingest.codes"
) &
ingest_pid=$!

echo "wrk: $wrk_threads threads, $conns connections, ${secs}s, round-robin over $nkeys keys; ingesting $ingest_rate msg/s meanwhile"
OMR_LOAD_CLIENTS="$clients" OMR_KEYS_FILE="$work/keys.txt" wrk -t"$wrk_threads" -c"$conns" -d"${secs}s" --timeout 10s \
  -s tests/load/digests.lua "http://$http" | tee "$work/wrk.out"
kill "$ingest_pid"; wait "$ingest_pid" 2>/dev/null || true; ingest_pid=
head1=$(metric omr_board_head); det1=$(metric omr_detections_total)
posted=$(wc -l < "$work/ingest.codes"); ingest_bad=$(grep -vc '^201$' "$work/ingest.codes" || true)

mkdir -p target/load
out="target/load/digests-$(date -u +%Y%m%dT%H%M%SZ).json"
python3 - "$work/wrk.out" "$out" <<EOF
import json, os, platform, sys
wrk = next(json.loads(l[7:]) for l in open(sys.argv[1]) if l.startswith("REPORT "))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
report = {
    "machine": {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)},
    "settings": {"keys": $nkeys, "kbar": $kbar, "board": $board, "connections": $conns, "wrk_threads": $wrk_threads,
                 "seconds": $secs, "ingest_rate": $ingest_rate, "worker_threads": $worker_threads, "store": "$store", "rate_limits": "${OMR_LOAD_LIMITS:-on}"},
    "digests": wrk,
    "digest_bytes_each": round(wrk["bytes"] / max(wrk["requests"], 1)),
    "during_test": {"messages_posted": $posted, "post_errors": $ingest_bad,
                    "board_head": [$head0, $head1], "detections": $det1 - $det0,
                    "detections_needed": ($head1 - $head0) * $nkeys},
    "target": {"rps": 1000, "p99_ms": 50},
}
e = wrk["errors"]
report["errors_total"] = sum(e.values()) + $ingest_bad
report["meets_target"] = wrk["rps"] >= 1000 and wrk["p99_ms"] <= 50 and report["errors_total"] == 0
json.dump(report, open(sys.argv[2], "w"), indent=2)
print(json.dumps(report, indent=2))
sys.exit(1 if report["errors_total"] else 0)
EOF
echo "report: $out"
