#!/usr/bin/env bash
# deploy/k8s: renders offline with `kubectl kustomize`, and the rendered objects have what the
# fleet design needs (k8s_check.py); the proxy pod's nginx config, rendered by its entry point,
# passes `nginx -t`; every symdexd.conf key is a symdexd flag.
#   k8s_check.sh SOURCE_DIR SYMDEXD_BIN
# Exits 77 (ctest: skipped) when kubectl is missing: it is in the development machine image, not
# a Debian 12 package, so a CI without it skips this test and says so.
set -euo pipefail
src=$1
symdexd=$2
if ! command -v kubectl >/dev/null; then
  echo "SKIP: kubectl not installed: deploy/k8s was not rendered (the nginx and flag checks need it too)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kubectl kustomize "$src/deploy/k8s" >"$work/rendered.yaml"
echo "ok    kubectl kustomize deploy/k8s: $(grep -c '^kind:' "$work/rendered.yaml") objects"
helptext=""
[ -x "$symdexd" ] && helptext=$("$symdexd" --help)
/usr/bin/python3 "$src/tests/fleet/k8s_check.py" "$work/rendered.yaml" "$work/k8s" <<<"$helptext"

# The proxy pod's entry point renders its nginx config; names that resolve here stand in for the
# replicas' DNS names, and `nginx -t` must accept the result.
nginx=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$nginx" ]; then
  SYMDEX_REPLICA_NAME=localhost SYMDEX_MAX_REPLICAS=1 \
    sh "$work/k8s/proxy-run.sh" --render "$work/nginx"
  grep -q 'server localhost:7070' "$work/nginx/upstream.conf" || { echo "FAIL: proxy-run.sh listed no replica:"; cat "$work/nginx/upstream.conf"; exit 1; }
  "$nginx" -e stderr -p "$work/nginx/" -c "$work/nginx/nginx.conf" -t 2>&1 | sed 's/^/      /'
  echo "ok    the proxy pod's nginx config (proxy-run.sh --render) passes nginx -t"
  SYMDEX_REPLICA_NAME=no-such-replica-%d.invalid SYMDEX_MAX_REPLICAS=2 \
    sh "$work/k8s/proxy-run.sh" --render "$work/nginx-none"
  "$nginx" -e stderr -p "$work/nginx-none/" -c "$work/nginx-none/nginx.conf" -t >/dev/null 2>&1 ||
    { echo "FAIL: with no replica resolvable the proxy's config does not load"; exit 1; }
  echo "ok    with no replica ready the proxy's nginx still loads (clients get UNAVAILABLE)"
else
  echo "note: nginx not installed: the proxy pod's config was not checked with nginx -t"
fi
echo "PASS"
