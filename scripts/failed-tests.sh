#!/usr/bin/env bash
# failed-tests.sh BUILD [LINES]: the last LINES (default 60) lines of the output of each test the last ctest run in
# BUILD failed (Testing/Temporary/LastTestsFailed.log names them; LastTest.log holds every test's output).
set -u
build=${1:?usage: failed-tests.sh BUILD [LINES]}
lines=${2:-60}
failed=$build/Testing/Temporary/LastTestsFailed.log
log=$build/Testing/Temporary/LastTest.log
[ -s "$failed" ] && [ -f "$log" ] || { echo "failed-tests.sh: no failed test recorded in $build"; exit 0; }
while IFS= read -r entry; do
  name=${entry#*:}
  echo "[test] ---- $name: the last $lines lines of its output ----"
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Test: " { current = substr($0, index($0, "Test: ") + 6); inside = 0; next }
    current == name && $0 == "Output:" { inside = 1; getline; next }
    current == name && $0 == "<end of output>" { inside = 0; current = ""; next }
    inside { print }
  ' "$log" | tail -n "$lines"
done < "$failed"
