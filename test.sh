#!/usr/bin/env bash
# Install everything the tests need and run them: the one test command of README.md.
#   ./test.sh            the whole suite
#   ./test.sh -k fetch   extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")"

# kcat from Debian (librdkafka 2.0.2): the tests drive it as a real client.
if ! command -v kcat >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq kcat >/dev/null
fi

venv="${BROOK_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
"$venv/bin/ruff" check .
exec "$venv/bin/python" -m pytest "$@"
