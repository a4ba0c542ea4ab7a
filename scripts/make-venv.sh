#!/usr/bin/env bash
# Make the project's virtual environment, or repair it: scripts/make-venv.sh [DIR]
# (default .venv). test.sh runs it before installing the project into DIR.
#
# - Debian and Ubuntu ship venv's pip bootstrap (ensurepip) apart, in python3-venv: without
#   it `python3 -m venv` fails half-way, leaving DIR/bin/python with no pip. It is installed
#   through apt-get where missing (with sudo unless root).
# - A venv left half made that way (a python, no pip) is made again, so that a run after a
#   failed first one works instead of failing the same way for ever.
set -euo pipefail
venv="${1:-.venv}"

if ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "make-venv: python3 has no ensurepip (venv cannot install pip); install your" \
            "distribution's venv package" >&2
        exit 1
    fi
    echo "make-venv: installing python3-venv (python3 -m venv needs it for pip)" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-venv >/dev/null
fi

if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "make-venv: $venv has a python but no pip (made without python3-venv?):" \
        "making it again" >&2
    python3 -m venv --clear "$venv"
elif [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
