#!/bin/sh
# The symdex-proxy container's entry point: nginx with an upstream list of the symdexd replicas
# that exist and are ready. nginx 1.2x resolves upstream host names only when it loads its
# configuration, and a server name that does not resolve is a fatal error; the HPA adds and
# removes replicas. So: every 10 s, resolve SYMDEX_REPLICA_NAME for 0..SYMDEX_MAX_REPLICAS-1
# (the headless service publishes ready pods only), write the ones that resolve, and reload
# nginx when the list or an address changed.
#   proxy-run.sh              run (the container)
#   proxy-run.sh --render DIR write DIR/nginx.conf and DIR/upstream.conf once and exit (tests)
set -eu
here=$(dirname "$0")
max=${SYMDEX_MAX_REPLICAS:-6}
name=${SYMDEX_REPLICA_NAME:-symdexd-%d.symdexd}
port=${SYMDEX_REPLICA_PORT:-7070}
run=${SYMDEX_PROXY_RUN_DIR:-/tmp/nginx}

render() {  # render OUT: the upstream servers, then the addresses they resolved to (a comment)
  servers="" addrs=""
  i=0
  while [ "$i" -lt "$max" ]; do
    # shellcheck disable=SC2059  # the format is the configured name pattern
    host=$(printf "$name" "$i")
    if a=$(getent hosts "$host" | awk '{print $1}' | sort | tr '\n' ' ') && [ -n "$a" ]; then
      servers="$servers        server $host:$port max_fails=1 fail_timeout=10s;
"
      addrs="$addrs $host=$a"
    fi
    i=$((i + 1))
  done
  if [ -z "$servers" ]; then
    # No replica ready: an upstream needs a server, and this one refuses, so clients get
    # UNAVAILABLE (not a proxy that fails to start) until a replica is ready.
    servers="        server 127.0.0.1:9 max_fails=0;
"
  fi
  printf '%s# resolved:%s\n' "$servers" "$addrs" >"$1"
}

mkdir -p "$run/tmp"
if [ "${1:-}" = "--render" ]; then
  run=$2
  mkdir -p "$run/tmp"
  cp "$here/nginx.conf" "$run/nginx.conf"
  render "$run/upstream.conf"
  exit 0
fi
cp "$here/nginx.conf" "$run/nginx.conf"
render "$run/upstream.conf"
nginx -e stderr -p "$run/" -c "$run/nginx.conf" &
pid=$!
trap 'kill -QUIT "$pid" 2>/dev/null; wait "$pid"; exit 0' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  sleep 10 &
  wait $! || true
  render "$run/upstream.conf.new"
  if cmp -s "$run/upstream.conf.new" "$run/upstream.conf"; then
    rm -f "$run/upstream.conf.new"
  else
    mv "$run/upstream.conf.new" "$run/upstream.conf"
    echo "symdex-proxy: replicas changed:$(sed -n 's/^# resolved://p' "$run/upstream.conf"); reloading nginx" >&2
    nginx -e stderr -p "$run/" -c "$run/nginx.conf" -s reload || true
  fi
done
wait "$pid"
