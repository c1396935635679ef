#!/usr/bin/env bash
# with_dir.sh NAME COMMAND ARGS...: runs COMMAND from the source root with REPRISE_DIR set to a fresh directory
# (relative to the root), removed afterwards.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
name=$1
shift
export REPRISE_DIR=build-test-files/$name-$$
trap 'rm -rf "$root/$REPRISE_DIR"' EXIT
"$@"
