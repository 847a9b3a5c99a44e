# Shared helpers for the integration scripts (sourced).
fail=0
check_eq() {  # check_eq WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then
    printf 'ok    %-60s %s\n' "$1" "$3"
  else
    printf 'FAIL  %-60s expected %s, got %s\n' "$1" "$2" "$3"
    fail=1
  fi
}
jq_num() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }
# roundtrip_mismatches DIR: how many of the canonical specs in DIR/canonical.tsv (`symdex symbols
# --canonical`: spec, location, module) do not resolve back to exactly their own symbol in
# DIR/roundtrip.json (`symdex resolve --json` of the specs, in order).
roundtrip_mismatches() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
w = sys.argv[1]
rows = [l.rstrip('\n').split('\t') for l in open(w + '/canonical.tsv')]
res = json.load(open(w + '/roundtrip.json'))['results']
bad = len(rows) != len(res)
for (spec, loc, mod), r in zip(rows, res):
    i = r.get('instance')
    got = None if not i else (i['address'][2:].rjust(16, '0') if i['address'] else f"{i['section']}+{hex(i['section_offset'])}")
    bad += r['status'] != 'ok' or got != loc or i['module'] != mod or i['canonical'] != spec
print(bad)
PY
}
