#!/usr/bin/env bash
# Install everything the tests need and run them: the one test command of README.md.
#   ./test.sh            the whole suite
#   ./test.sh -k fetch   extra arguments go to pytest (run by 6 pytest-xdist workers)
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the tests use: kcat (librdkafka 2.0.2) as a real client, mkfs.ext4
# (e2fsprogs) for the full-disk tests, which mount a small ext4 image, a JVM for
# the Spark data source's tests (tests/spark/; PySpark 4 runs on Java 17), Chromium, which
# opens the audit's HTML report headless and takes its screenshot, and for the image tests
# (tests/image/) podman with runc, mmdebstrap to make the Debian base image and shellcheck
# for the image's entrypoint script, and ZooKeeper (Debian's 3.8) for the cluster tests.
missing=""
command -v kcat >/dev/null 2>&1 || missing="$missing kcat"
command -v mkfs.ext4 >/dev/null 2>&1 || missing="$missing e2fsprogs"
# A JDK, not a JRE alone: tests/java_client/ compiles its harness with javac.
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v podman >/dev/null 2>&1 || missing="$missing podman"
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing="$missing runc"
command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap"
command -v shellcheck >/dev/null 2>&1 || missing="$missing shellcheck"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
# ZooKeeper 3.8 for the cluster tests (tests/cluster/), run from its jars with the JVM.
[ -f /usr/share/java/zookeeper.jar ] || missing="$missing zookeeper"
# Maven fetches Apache Kafka's jars (jvm/pom.xml) for the tests that hold Brook against
# Kafka's own tools, its Java client and Kafka Streams (tests/apache_kafka/,
# tests/java_client/), and Spark's Kafka connector (jvm/spark-kafka/pom.xml), into a cache
# later runs reuse.
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
# Prometheus (Debian's 2.42, with promtool) for the observability tests: it scrapes a live
# broker and evaluates the Grafana dashboard's queries. Optional: where it cannot be
# installed, those tests skip and say why. Without its recommends (node-exporter).
optional=""
command -v prometheus >/dev/null 2>&1 || optional="prometheus"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if [ -n "$missing$optional" ]; then
    $sudo_cmd apt-get update -qq
fi
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq $missing >/dev/null
fi
if [ -n "$optional" ]; then
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
        $optional >/dev/null ||
        echo "test.sh: could not install $optional; the tests that need it will skip" >&2
fi

venv="${BROOK_VENV:-.venv}"
# Made where missing, made again where a failed first run left it without pip, with
# python3-venv installed where Debian's python3 lacks it.
scripts/make-venv.sh "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
"$venv/bin/ruff" check .
# Type check every product package (strict; settings and why the links, in pyproject.toml).
# They install as brook.protocol, brook.storage, brook.coordinator_state, brook.broker and
# brook.spark, a mapping mypy cannot follow, so it reads them through links under
# build/mypy-path/brook/. The cache (.mypy_cache) keeps a rerun to seconds.
mkdir -p build/mypy-path/brook
for package in protocol storage coordinator_state broker spark; do
    ln -sfn "../../../$package" "build/mypy-path/brook/$package"
done
"$venv/bin/mypy"
# The suite starts hundreds of Python processes (brokers, the CLI, Spark's Python workers)
# that import the same modules. Where PYTHONDONTWRITEBYTECODE is set (this machine's
# environment sets it) each would compile them anew, about 0.2 s a process, and pytest
# could not keep the test modules it rewrites: bytecode is written, as in a checkout
# without the variable, and the product's compiled once before the workers start.
unset PYTHONDONTWRITEBYTECODE
"$venv/bin/python" -m compileall -q -j 0 protocol storage coordinator_state broker spark bench \
    >/dev/null
# pytest rewrites each test module's asserts and keeps the result as bytecode: six workers
# starting at once on a clean checkout would each rewrite all of them (12 CPU-s apiece),
# so one collection first leaves them cached (5 CPU-s apiece then). Its errors, if any,
# are the run's to report.
"$venv/bin/python" -m pytest --collect-only -q -p no:xdist -p no:cacheprovider "$@" \
    >/dev/null 2>&1 || true
# Six workers: most tests wait on brokers, sockets and ZooKeeper sessions, so two cores keep
# six busy (the suite took 11:31 with four here, 10:20 with six).
# Every broker a test starts has its own port and data dir. BROOK_TEST_WORKERS=0 runs
# the suite in this process. The Spark tests share a JVM per group: they are three xdist
# groups (tests/spark/conftest.py), each of which --dist loadgroup keeps on one worker; so
# are the image tests, one group, which share one built image (tests/image/conftest.py).
# The 20 slowest steps are listed at the end: the suite's time is watched (README).
exec "$venv/bin/python" -m pytest -n "${BROOK_TEST_WORKERS:-6}" --dist loadgroup --durations=20 "$@"
