#!/usr/bin/env bash
# A PostgreSQL-backed Temporal server on 127.0.0.1 (`make cluster`):
# PostgreSQL from Debian's packages in a data directory under .run/cluster,
# the Temporal server and its SQL schema tool built from the Go module proxy
# (tools/cluster/go.mod, `make cluster-build`), the default namespace and
# the workflow's search attributes. Each process is started in the
# background and stopped by its pid.
#
#   scripts/cluster.sh start            initialize on first use, then start
#   scripts/cluster.sh stop             stop the server, then PostgreSQL
#   scripts/cluster.sh status           what runs, and the address
#   scripts/cluster.sh restart-server   SIGKILL the Temporal server and start
#                                       it again (the restart test's crash)
#   scripts/cluster.sh env              the worker's environment, to eval
#
# Settings (environment): CLUSTER_DIR (.run/cluster), CLUSTER_PORT (17233,
# the frontend; the other services use the next ports), CLUSTER_PG_PORT
# (15432), CLUSTER_SHARDS (4, only read when the database is created),
# CLUSTER_DB_CONNS (20), KARVI_EDDA_BIN (bin), TEMPORAL_CLI (bin/temporal).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${CLUSTER_DIR:-$ROOT/.run/cluster}
BIN=${KARVI_EDDA_BIN:-$ROOT/bin}
CLI=${TEMPORAL_CLI:-$BIN/temporal}
PORT=${CLUSTER_PORT:-17233}
PG_PORT=${CLUSTER_PG_PORT:-15432}
SHARDS=${CLUSTER_SHARDS:-4}
DB_CONNS=${CLUSTER_DB_CONNS:-20}
ADDR=127.0.0.1:$PORT
NAMESPACE=default
# The workflow's keyword search attributes (workflows.SearchAttributeNames;
# the worker adds any that are missing when it starts).
SEARCH_ATTRIBUTES=(KarviTaskId EddaPlanName EddaCurrentPhase KarviTaskStatus)

PGDATA=$DIR/pg/data
SECRETS=$DIR/secrets.env
SERVER_PID=$DIR/server.pid
SERVER_LOG=$DIR/server.log

die() { echo "cluster: $*" >&2; exit 1; }
log() { echo "cluster: $*" >&2; }

for n in PORT PG_PORT SHARDS DB_CONNS; do
  [[ ${!n} =~ ^[0-9]+$ ]] || die "CLUSTER_$n must be a number, not '${!n}'"
done

# pg_bin finds Debian's PostgreSQL binaries, installing the package when it
# is missing and we may (root); the newest major version wins.
pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  if [[ -z $d || ! -x $d/initdb ]]; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
      log "PostgreSQL missing: installing Debian's postgresql package"
      apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
      d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
    fi
    [[ -n $d && -x $d/initdb ]] || die "PostgreSQL not found under /usr/lib/postgresql: install it (apt-get install -y postgresql)"
  fi
  echo "$d"
}

# as_pg runs a PostgreSQL program as the data directory's owner: postgres
# refuses to run as root, so root runs it as the postgres user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the postgres user (Debian's postgresql package creates it)"
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

need() {
  for b in "$@"; do
    [[ -x $b ]] || die "$b not built: run \`make cluster-build\` (and \`make temporal\` for the CLI)"
  done
}

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

pg_running() { [[ -f $PGDATA/postmaster.pid ]] && kill -0 "$(head -n1 "$PGDATA/postmaster.pid")" 2>/dev/null; }

pg_init() {
  local pgbin=$1
  [[ -f $PGDATA/PG_VERSION ]] && return 0
  log "initdb into $PGDATA"
  mkdir -p "$DIR/pg"
  umask 077
  # Passwords of the superuser and of the server's role, kept beside the data.
  local su pw
  su=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  pw=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf 'PG_SUPERUSER_PASSWORD=%s\nPG_PASSWORD=%s\n' "$su" "$pw" >"$SECRETS"
  printf '%s\n' "$su" >"$DIR/pg/pwfile"
  umask 022
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$DIR/pg"; fi
  as_pg "$pgbin/initdb" -D "$PGDATA" -U postgres --auth=scram-sha-256 --pwfile="$DIR/pg/pwfile" \
    --encoding=UTF8 --locale=C >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
  rm -f "$DIR/pg/pwfile"
}

pg_start() {
  local pgbin=$1
  if pg_running; then return 0; fi
  # TCP on 127.0.0.1 only, no Unix socket; a log file the owner can write.
  as_pg "$pgbin/pg_ctl" -D "$PGDATA" -l "$PGDATA/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories='' -c max_connections=200" start >&2 \
    || { tail -n 20 "$PGDATA/postgres.log" >&2 || true; die "PostgreSQL did not start on 127.0.0.1:$PG_PORT"; }
}

pg_stop() {
  local pgbin
  pg_running || return 0
  pgbin=$(pg_bin)
  as_pg "$pgbin/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop >&2
}

# schema creates the role, both databases and their schemas with the
# server's own SQL tool on first use; later starts only update the schemas
# (so a newer server brings its migrations).
schema() {
  local pgbin=$1
  # shellcheck disable=SC1090
  source "$SECRETS"
  if [[ ! -f $DIR/schema.done ]]; then
    PGPASSWORD=$PG_SUPERUSER_PASSWORD "$pgbin/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres \
      -v ON_ERROR_STOP=1 -c "CREATE ROLE temporal LOGIN CREATEDB PASSWORD '$PG_PASSWORD'" >&2
  fi
  local tool=("$BIN/temporal-sql-tool" --plugin postgres12 --ep 127.0.0.1 -p "$PG_PORT" -u temporal --pw "$PG_PASSWORD")
  local db
  for db in temporal:temporal temporal_visibility:visibility; do
    local name=${db%%:*} schema=postgresql/v12/${db##*:}
    if [[ ! -f $DIR/schema.done ]]; then
      "${tool[@]}" --db "$name" create-database >>"$DIR/schema.log" 2>&1 || { cat "$DIR/schema.log" >&2; die "create-database $name failed"; }
      "${tool[@]}" --db "$name" setup-schema -v 0.0 >>"$DIR/schema.log" 2>&1 || { cat "$DIR/schema.log" >&2; die "setup-schema $name failed"; }
    fi
    "${tool[@]}" --db "$name" update-schema --schema-name "$schema" >>"$DIR/schema.log" 2>&1 \
      || { tail -n 20 "$DIR/schema.log" >&2; die "update-schema $name failed"; }
  done
  touch "$DIR/schema.done"
}

render_config() {
  # shellcheck disable=SC1090
  source "$SECRETS"
  mkdir -p "$DIR/config"
  cp tools/cluster/dynamicconfig.yaml "$DIR/config/dynamicconfig.yaml"
  local shards=$SHARDS
  # The shard count is the database's: keep the one it was created with.
  if [[ -f $DIR/shards ]]; then shards=$(cat "$DIR/shards"); else echo "$SHARDS" >"$DIR/shards"; fi
  umask 077
  sed -e "s#@SHARDS@#$shards#" -e "s#@PG_PORT@#$PG_PORT#g" -e "s#@PG_PASSWORD@#$PG_PASSWORD#g" \
    -e "s#@DB_CONNS@#$DB_CONNS#g" \
    -e "s#@FRONTEND_PORT@#$PORT#g" -e "s#@HISTORY_PORT@#$((PORT + 1))#g" \
    -e "s#@MATCHING_PORT@#$((PORT + 2))#g" -e "s#@WORKER_PORT@#$((PORT + 3))#g" \
    -e "s#@FRONTEND_MEMBERSHIP_PORT@#$((PORT + 10))#g" -e "s#@HISTORY_MEMBERSHIP_PORT@#$((PORT + 11))#g" \
    -e "s#@MATCHING_MEMBERSHIP_PORT@#$((PORT + 12))#g" -e "s#@WORKER_MEMBERSHIP_PORT@#$((PORT + 13))#g" \
    -e "s#@HTTP_PORT@#$((PORT + 20))#g" -e "s#@METRICS_PORT@#$((PORT + 30))#g" \
    -e "s#@DYNAMIC_CONFIG@#$DIR/config/dynamicconfig.yaml#g" \
    tools/cluster/config.yaml >"$DIR/config/cluster.yaml"
  umask 022
}

server_start() {
  if pid_alive "$SERVER_PID"; then return 0; fi
  # setsid: the server outlives the make that started it, in a group of its own.
  setsid "$BIN/temporal-server" --root "$DIR" --config config --env cluster --allow-no-auth start \
    >>"$SERVER_LOG" 2>&1 </dev/null &
  echo $! >"$SERVER_PID"
  local i
  for i in $(seq 1 240); do
    if "$CLI" operator cluster health --address "$ADDR" >/dev/null 2>&1; then
      log "Temporal server (pid $(cat "$SERVER_PID")) serving on $ADDR"
      return 0
    fi
    pid_alive "$SERVER_PID" || { tail -n 30 "$SERVER_LOG" >&2; die "the Temporal server exited (log: $SERVER_LOG)"; }
    sleep 0.5
  done
  tail -n 30 "$SERVER_LOG" >&2
  die "the Temporal server did not serve on $ADDR within 120 s (log: $SERVER_LOG)"
}

server_stop() {
  local sig=${1:-TERM} pid i
  pid_alive "$SERVER_PID" || { rm -f "$SERVER_PID"; return 0; }
  pid=$(cat "$SERVER_PID")
  kill "-$sig" "$pid"
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "the Temporal server (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$SERVER_PID"
}

# namespace registers the default namespace and the workflow's search
# attributes when they are missing; a new namespace takes a moment to reach
# every service, so its describe is polled.
namespace() {
  local cli=("$CLI" --address "$ADDR")
  if ! "${cli[@]}" operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
    "${cli[@]}" operator namespace create --namespace "$NAMESPACE" --retention 72h >&2
  fi
  local i have
  for i in $(seq 1 60); do
    have=$("${cli[@]}" operator search-attribute list --namespace "$NAMESPACE" 2>/dev/null) && break
    sleep 0.5
  done
  local args=()
  for sa in "${SEARCH_ATTRIBUTES[@]}"; do
    grep -qw "$sa" <<<"$have" || args+=(--name "$sa" --type Keyword)
  done
  if ((${#args[@]})); then
    "${cli[@]}" operator search-attribute create --namespace "$NAMESPACE" "${args[@]}" >&2
  fi
}

start() {
  need "$BIN/temporal-server" "$BIN/temporal-sql-tool" "$CLI"
  local pgbin
  pgbin=$(pg_bin)
  mkdir -p "$DIR"
  pg_init "$pgbin"
  pg_start "$pgbin"
  schema "$pgbin"
  render_config
  server_start
  namespace
  log "ready: TEMPORAL_ADDRESS=$ADDR TEMPORAL_NAMESPACE=$NAMESPACE ($(cat "$DIR/shards") history shards; PostgreSQL 127.0.0.1:$PG_PORT, data $PGDATA)"
}

stop() {
  server_stop TERM
  pg_stop
  log "stopped"
}

status() {
  if pid_alive "$SERVER_PID"; then echo "temporal server: pid $(cat "$SERVER_PID"), $ADDR"; else echo "temporal server: stopped"; fi
  if pg_running; then echo "postgresql: pid $(head -n1 "$PGDATA/postmaster.pid"), 127.0.0.1:$PG_PORT"; else echo "postgresql: stopped"; fi
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart-server)
    need "$BIN/temporal-server" "$CLI"
    pid_alive "$SERVER_PID" || die "the Temporal server is not running: run \`make cluster\` first"
    server_stop KILL
    server_start
    ;;
  env) echo "export TEMPORAL_ADDRESS=$ADDR TEMPORAL_NAMESPACE=$NAMESPACE" ;;
  *) die "usage: $0 start|stop|status|restart-server|env" ;;
esac
