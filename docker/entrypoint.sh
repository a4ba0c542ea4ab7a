#!/bin/sh
# The image's entrypoint. When BROOK_ADVERTISED_LISTENERS is unset it advertises the image's
# two listeners: PLAINTEXT as localhost:9092, what `-p 9092:9092` reaches from the host, and
# DOCKER as this container's hostname, which Docker's DNS resolves for the other containers of
# a user-defined network (the container's id, or compose's `hostname:`).
# Before `brook serve` it checks that this user can write every data directory
# (BROOK_LOG_DIRS): a host directory bind-mounted on the volume is often owned by another uid,
# and the broker would otherwise stop on a permission error about an internal file. Then it
# runs the command in its place, so the broker is PID 1 and gets `docker stop`'s SIGTERM
# itself.
set -eu

say() {
    echo "brook-entrypoint: $*" >&2
}

check_writable() {
    dir=$1
    # A missing directory is the broker's to create (and to report if it cannot).
    [ -e "$dir" ] || return 0
    # The first entry, the directory itself included, that this user cannot write.
    blocked=$(find "$dir" ! -writable -print -quit 2>/dev/null) || true
    [ -n "$blocked" ] || return 0
    uid=$(id -u)
    gid=$(id -g)
    owner=$(stat -c '%u:%g' "$blocked")
    say "cannot start: the data directory $dir is not writable by uid $uid:"
    say "  $blocked is owned by uid:gid $owner (mode $(stat -c '%a' "$blocked"))."
    say "A bind-mounted host directory must be writable by uid $uid. Either:"
    say "  - use a named volume instead, which starts out owned by the image's user (10001):"
    say "      docker run -v brook-data:$dir ..."
    say "  - or give the host directory to uid $uid, on the host:"
    say "      sudo chown -R $uid:$gid /path/on/host"
    say "  - or run the container as the directory's owner: docker run --user $owner ..."
    exit 1
}

# Only when unset: an empty value is the broker's own default (each listener advertised as is).
if [ -z "${BROOK_ADVERTISED_LISTENERS+set}" ]; then
    BROOK_ADVERTISED_LISTENERS="PLAINTEXT://localhost:9092,DOCKER://$(hostname):29092"
    export BROOK_ADVERTISED_LISTENERS
fi

if [ "${1:-}" = brook ] && [ "${2:-}" = serve ]; then
    # BROOK_LOG_DIRS is comma-separated, as log.dirs is: split on commas, no globbing.
    set -f
    old_ifs=$IFS
    IFS=,
    for dir in ${BROOK_LOG_DIRS:-}; do
        IFS=$old_ifs
        check_writable "$dir"
    done
    IFS=$old_ifs
    set +f
fi

exec "$@"
