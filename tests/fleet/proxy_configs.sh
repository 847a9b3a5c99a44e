#!/usr/bin/env bash
# The shipped proxy configurations (deploy/proxy/) load: `nginx -t` and `haproxy -c`, as the
# user running the test, with nothing outside a temporary prefix. (fleet-up.sh runs the same
# checks on the copies it renders with real ports; fleet_routing_* run those.) Each also has
# the markers fleet-up.sh renders, and the hash-on-build-ID directives.
#   proxy_configs.sh SOURCE_DIR
# Exits 77 (ctest: skipped) when neither nginx nor haproxy is installed.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp"  # nginx creates its temp dirs below PREFIX/tmp, not the parent
checked=0
fail=0
need() {  # need FILE REGEX WHAT
  if grep -Eq "$2" "$1"; then echo "ok    $(basename "$1"): $3"; else echo "FAIL  $(basename "$1"): $3 (no /$2/)"; fail=1; fi
}
for f in nginx.conf haproxy.cfg; do
  need "$src/deploy/proxy/$f" '^ *# BEGIN servers$' "server list start marker"
  need "$src/deploy/proxy/$f" '^ *# END servers$' "server list end marker"
done
# shellcheck disable=SC2016  # a literal $ in the pattern
need "$src/deploy/proxy/nginx.conf" '^ *hash \$http_symdex_build_id consistent;' "consistent hash on the header"
need "$src/deploy/proxy/nginx.conf" '# fleet: listen$' "listen marker"
need "$src/deploy/proxy/haproxy.cfg" '^ *balance hdr\(symdex-build-id\)' "balance on the header"
need "$src/deploy/proxy/haproxy.cfg" '^ *hash-type consistent' "consistent hashing"
need "$src/deploy/proxy/haproxy.cfg" '# fleet: bind$' "bind marker"

nginx=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$nginx" ]; then
  if "$nginx" -e stderr -p "$work/" -c "$src/deploy/proxy/nginx.conf" -t >"$work/nginx.out" 2>&1; then
    echo "ok    nginx -t deploy/proxy/nginx.conf"
  else
    echo "FAIL  nginx -t deploy/proxy/nginx.conf:"; cat "$work/nginx.out"; fail=1
  fi
  checked=$((checked + 1))
else
  echo "note: nginx not installed (scripts/setup-deps.sh installs nginx-light)"
fi
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
if [ -x "$haproxy" ]; then
  if "$haproxy" -c -f "$src/deploy/proxy/haproxy.cfg" >"$work/haproxy.out" 2>&1; then
    echo "ok    haproxy -c deploy/proxy/haproxy.cfg"
  else
    echo "FAIL  haproxy -c deploy/proxy/haproxy.cfg:"; cat "$work/haproxy.out"; fail=1
  fi
  checked=$((checked + 1))
else
  echo "note: haproxy not installed (scripts/setup-deps.sh installs it)"
fi
[ "$fail" = 0 ] || exit 1
if [ "$checked" = 0 ]; then echo "SKIP: neither nginx nor haproxy is installed"; exit 77; fi
echo "PASS"
