#!/usr/bin/env bash
# The annotation-store tests run against a real PostgreSQL server. Use the one on
# 127.0.0.1:5432 when it answers; otherwise try to start the machine's cluster; otherwise say why.
set -uo pipefail
HOST=127.0.0.1
PORT=5432
ready() { pg_isready -q -h "$HOST" -p "$PORT" 2>/dev/null || \
          (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }
if ready; then exit 0; fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  echo "PostgreSQL is not answering on $HOST:$PORT: starting the local cluster" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do ready && exit 0; sleep 1; done
fi
INITDB=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -n1)
if [ -n "$INITDB" ]; then
  BINDIR=$(dirname "$INITDB")
  DATA=$(mktemp -d /tmp/faillab-pg.XXXXXX)
  echo "starting a throwaway PostgreSQL in $DATA" >&2
  if [ "$(id -u)" -eq 0 ]; then chown postgres "$DATA"; RUN="su postgres -c"; else RUN="bash -c"; fi
  $RUN "$BINDIR/initdb -D $DATA -A trust -U postgres >/dev/null && \
        $BINDIR/pg_ctl -D $DATA -o '-p $PORT -k /tmp' -l $DATA/log start >/dev/null" || true
  for _ in $(seq 1 30); do
    if ready; then
      psql -h "$HOST" -p "$PORT" -U postgres -c "CREATE DATABASE test" >/dev/null 2>&1 || true
      exit 0
    fi
    sleep 1
  done
fi
echo "error: no PostgreSQL server on $HOST:$PORT and none could be started here." >&2
echo "       Install PostgreSQL (apt-get install postgresql) or set FAILLAB_TEST_POSTGRES_URL." >&2
exit 1
