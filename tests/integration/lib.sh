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
