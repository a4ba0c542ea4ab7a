"""Apache Kafka 3.9 (the last release with ZooKeeper) takes over a Brook broker's log dir and
the ZooKeeper it registered in: a Brook broker of a ZooKeeper cluster writes a topic (keyed
records over two partitions, a gzip batch, an idempotent producer's), stops; Kafka 3.9,
started with the same broker.id on a copy of its log dir and the same ZooKeeper chroot,
reads the topic's znodes as its own and serves every record at its offset."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bench.apache_kafka import ZOOKEEPER_KAFKA_POM, java_env, kafka_jars
from brook.broker.testing import BrokerProcess, free_port, wait_for_port, wait_until
from brook.broker.zookeeper.server import ZooKeeperServer
from tests.cluster.harness import metadata_of

from .kafka_written import Row, read_topics

BROKER_ID = 1
# Kafka 3.9 logs through reload4j: WARN and above to its output file.
LOG4J = """\
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _kafka_39(
    home: Path, log_dir: Path, zookeeper_connect: str
) -> tuple[subprocess.Popen[bytes], int]:
    libs = kafka_jars(ZOOKEEPER_KAFKA_POM)
    port = free_port()
    config = home / "server.properties"
    config.write_text(
        f"broker.id={BROKER_ID}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={log_dir}\n"
        f"zookeeper.connect={zookeeper_connect}\n"
        "offsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
    )
    log4j = home / "log4j.properties"
    log4j.write_text(LOG4J)
    with open(home / "kafka.out", "wb") as output:
        process = subprocess.Popen(
            [
                "java",
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                f"-Dlog4j.configuration=file:{log4j}",
                "-cp",
                f"{libs}/*",
                "kafka.Kafka",
                str(config),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=java_env(),
        )
    return process, port


def test_kafka_39_serves_the_records_a_brook_cluster_broker_wrote(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    connect = f"{zookeeper.connect}/brook-to-kafka-39"
    brook = BrokerProcess(
        tmp_path / "brook",
        {
            "zookeeper.connect": connect,
            "broker.id": BROKER_ID,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
        },
    ).start()
    try:
        # The broker registered and elected itself controller (ZooKeeper's /controller).
        wait_until(lambda: metadata_of(brook.port).controller_id == BROKER_ID, "a controller")
        brook.create_topic("orders", 2)
        brook.produce("orders", [(b"k%d" % n, b"v%d" % n) for n in range(200)])
        brook.produce("orders", [b"gz%d" % n for n in range(50)], 0, {"compression.type": "gzip"})
        written: list[Row] = read_topics(brook.bootstrap, {"orders": 2}, "read_uncommitted")[
            "orders"
        ]
    finally:
        assert brook.stop() == 0
    assert len(written) == 250
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "brook", copy)
    home = tmp_path / "kafka"
    home.mkdir()
    kafka, port = _kafka_39(home, copy, connect)
    try:
        wait_for_port(port, 120, kafka)
        served = read_topics(f"127.0.0.1:{port}", {"orders": 2}, "read_uncommitted")["orders"]
    finally:
        kafka.terminate()
        kafka.wait(60)
    assert served == written
    complaints = [
        line
        for line in (home / "kafka.out").read_text().splitlines()
        if " ERROR " in line
        or (
            "WARN" in line
            and "could not be established" not in line
            and "was unsuccessful" not in line
        )
    ]
    assert complaints == [], os.linesep.join(complaints)
