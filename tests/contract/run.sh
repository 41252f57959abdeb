#!/usr/bin/env bash
# The API as clients this project did not write see it, against a real omrd (the release build
# the test suite made) on the embedded store:
#  1. grpc_client.py: a Python grpcio client generated from proto/omr/v1/detector.proto
#     registers a key, waits for detection, compares the gRPC and HTTP digests, checks error
#     codes and reflection (v1 and v1alpha);
#  2. schemathesis, property-based, from the served /openapi.json: without a token, with the
#     admin token, and with that key's access token; any 5xx, any status, content type, header
#     or body the document does not declare fails it (schemathesis.toml says which checks run
#     and why the others do not).
# The clients are pinned in requirements.txt and installed into a venv of their own
# (target/contract-venv). Usage: tests/contract/run.sh [BIN_DIR]  (default target/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
bin=${1:-target/release}
venv=target/contract-venv

python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/contract/requirements.txt

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

admin=$("$venv/bin/python" -c 'import secrets; print(secrets.token_hex(24))')
# Rate limits off: every request comes from one address (the limits have their own tests).
OMR_ADMIN_TOKEN=$admin \
OMR_PARAM_SET=insecure-test OMR_ALLOW_INSECURE_PARAMS=true \
OMR_EPOCH_LEN=8 OMR_POLL_INTERVAL_MS=200 OMR_DETECT_BATCH=3 \
OMR_RATE_LIMIT_PER_SECOND=0 OMR_READ_RATE_LIMIT_PER_SECOND=0 OMR_DIGEST_RATE_LIMIT_PER_SECOND=0 \
  "$bin/omrd" --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" \
  >"$work/omrd.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  [ -s "$work/data/omrd.addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/omrd.log"; exit 1; }
  sleep 0.1
done
addr() { "$venv/bin/python" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/data/omrd.addr" "$1"; }
http="http://$(addr http)"
grpc=$(addr grpc)
echo "omrd: HTTP $http, gRPC $grpc"

echo "== a Python grpcio client"
mkdir -p "$work/keys"
"$venv/bin/python" tests/contract/grpc_client.py --omr "$bin/omr" --http "$http" --grpc "$grpc" \
  --proto "$root/proto" --param-set insecure-test --work "$work/keys" >"$work/key.json"
key_id=$("$venv/bin/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['key_id'])" "$work/key.json")
token=$("$venv/bin/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['access_token'])" "$work/key.json")

st() {
  OMR_KEY_ID=$key_id "$venv/bin/schemathesis" --config-file tests/contract/schemathesis.toml \
    run "$http/openapi.json" "$@"
}
echo "== schemathesis: no token"
st
echo "== schemathesis: the admin token"
st -H "Authorization: Bearer $admin"
echo "== schemathesis: the registered key's token"
st -H "Authorization: Bearer $token"

# Whatever the runs sent, omrd stayed up and logged no panic.
kill -0 "$pid"
if grep -q "panicked" "$work/omrd.log"; then
  grep -n "panicked" "$work/omrd.log"
  exit 1
fi
echo "contract: OK"
