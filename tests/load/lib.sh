# shellcheck shell=bash
# shellcheck disable=SC2034  # pid, http, grpc, db, admin are for the sourcing script
# Shared by the load scripts: start omrd (release build) on ephemeral ports on a fresh store.
#
#   start_omrd STORE WORKDIR   # STORE: sqlite | postgres (a fresh database on
#                              # $OMR_LOAD_POSTGRES_URL's server, default the local one)
#
# Sets: pid (omrd's), http and grpc (host:port), db and admin (PostgreSQL only).
# stop_omrd kills it and drops the database. Extra omrd settings come from OMR_* variables;
# OMR_LOAD_OMRD=PATH runs another omrd binary (an A/B against an older commit's build).

start_omrd() {
  local store="$1" work="$2"
  local args=(--http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" --log-format json)
  db=
  if [ "$store" = postgres ]; then
    admin="${OMR_LOAD_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    db="omr_load_$(date +%s)_$$"
    psql "$admin" -qc "CREATE DATABASE $db"
    args+=(--database-url "${admin%/*}/$db")
    echo "store: PostgreSQL ($(psql "$admin" -tAc 'SHOW synchronous_commit') synchronous_commit, fsync $(psql "$admin" -tAc 'SHOW fsync'))"
  else
    echo "store: SQLite (WAL, synchronous=FULL) under $work/data"
  fi
  RUST_LOG=warn "${OMR_LOAD_OMRD:-target/release/omrd}" "${args[@]}" 2> "$work/omrd.log" &
  pid=$!
  for _ in $(seq 1 100); do [ -s "$work/data/omrd.addr" ] && break; sleep 0.1; done
  read -r http grpc < <(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(a["http"], a["grpc"])' "$work/data/omrd.addr")
}

stop_omrd() {
  if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; fi
  if [ -n "${db:-}" ]; then psql "$admin" -qc "DROP DATABASE IF EXISTS $db" 2>/dev/null; db=; fi
  return 0
}
