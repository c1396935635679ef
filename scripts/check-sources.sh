#!/usr/bin/env bash
# Checks the sources as CI does (ctest runs both):
#   scripts/check-sources.sh format          clang-format (.clang-format) on every C++ file git tracks, and no line
#                                            over 120 columns in C++ and Python files
#   scripts/check-sources.sh tidy BUILD_DIR  clang-tidy (.clang-tidy) on the C++ files of src, apps and bench that
#                                            BUILD_DIR compiles (its compile_commands.json), both cores
# Prints each problem and exits 1 when there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
case "$what" in
  format)
    command -v clang-format > /dev/null || { echo "clang-format is not installed (scripts/setup.sh installs it)"; exit 2; }
    mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h')
    status=0
    bad=$(clang-format --dry-run -Werror "${files[@]}" 2>&1 | grep -E '^[^ ].*: (error|warning):' | cut -d: -f1 | sort -u)
    if [ -n "$bad" ]; then
      echo "not formatted as .clang-format says (run: clang-format -i FILE):"
      echo "$bad" | sed 's/^/  /'
      status=1
    fi
    mapfile -t texts < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' '*.py')
    long=$(awk 'length($0) > 120 {print FILENAME ":" FNR ": " length($0) " columns"}' "${texts[@]}")
    if [ -n "$long" ]; then
      echo "lines over 120 columns:"
      echo "$long" | sed 's/^/  /'
      status=1
    fi
    [ $status -eq 0 ] && echo "sources ok: ${#files[@]} C++ files formatted, ${#texts[@]} files within 120 columns"
    exit $status
    ;;
  tidy)
    build=${2:?usage: scripts/check-sources.sh tidy BUILD_DIR}
    command -v clang-tidy > /dev/null || { echo "clang-tidy is not installed (scripts/setup.sh installs it)"; exit 2; }
    [ -f "$build/compile_commands.json" ] || { echo "$build/compile_commands.json is missing (configure first)"; exit 2; }
    mapfile -t files < <(git ls-files 'src/*.cpp' 'apps/*.cpp' 'bench/*.cpp' |
                           while read -r f; do grep -q "\"file\": \".*/$f\"" "$build/compile_commands.json" && echo "$f"; done)
    out=$(printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet 2>/dev/null |
          grep -E '(warning|error): ' || true)
    if [ -n "$out" ]; then
      echo "$out"
      echo "clang-tidy: $(echo "$out" | wc -l) finding(s) in ${#files[@]} files"
      exit 1
    fi
    echo "clang-tidy clean: ${#files[@]} files"
    ;;
  *) sed -n '2,7p' "$0"; exit 2 ;;
esac
