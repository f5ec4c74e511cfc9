#!/usr/bin/env bash
# The dashboard in Debian's chromium, driven by playwright-core (npm), against the real binary.
# Usage: run.sh /path/to/floodgate WORK_DIR [TEST.mjs [ARGS…]]   (default dashboard_test.mjs; screenshots
# and figures.json go to WORK_DIR/artifacts; ARGS follow those two)
# playwright-core is installed with `npm ci` from package-lock.json into WORK_DIR (the npm cache
# makes later runs work offline); the browser is /usr/bin/chromium (scripts/deps.sh --test).
set -euo pipefail
floodgate="$(realpath "$1")"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
if [[ ! -x /usr/bin/chromium ]]; then
  echo "browser test: /usr/bin/chromium is missing (scripts/deps.sh --test installs it)" >&2
  exit 1
fi
mkdir -p "$work"
test="${3:-dashboard_test.mjs}"
cp "$here/package.json" "$here/package-lock.json" "$here/$test" "$work/"
cd "$work"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error
exec node "$test" "$floodgate" "$work/artifacts" "${@:4}"
