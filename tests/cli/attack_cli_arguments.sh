#!/usr/bin/env bash
# The attack table's entry (tools/stress/attack_table.sh, area cli) for bad CLI arguments and preset files:
# runs tests/cli/cli_errors.sh against BUILD_DIR's ktune.
# usage: attack_cli_arguments.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: attack_cli_arguments.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x "$build/bin/ktune" ]] || { echo "skipped: $build/bin/ktune not built"; exit 77; }
exec "$here/cli_errors.sh" "$build/bin/ktune" "$here/../.."
