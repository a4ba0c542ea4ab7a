"""`brook reassign` as kafka-reassign-partitions.sh, end to end on four brokers: --generate a
proposal over a broker list, --execute it, --verify and --list it, and, with a move held in
progress, --list, --verify, --execute refused without --additional, --cancel; bad files and
options refused with Kafka's messages and nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

from brook.protocol.errors import ErrorCode
from tests.integration.processes import run_brook

from .harness import Cluster, ZooKeeperView, eventually
from .reassign_requests import alter, moved_to
from .test_reassign import TOPIC, create, start_four
from .topics import state_of


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def _brook(bootstrap: str, *args: str) -> tuple[int, str]:
    done = run_brook(["reassign", "--bootstrap-server", bootstrap, *args], timeout=60)
    return done.returncode, done.output


def test_generate_execute_verify_list(cluster: Cluster, zk: ZooKeeperView, tmp_path: Path):
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3], [1, 2, 3]])
    bootstrap = brokers[2].bootstrap
    topics = _write(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": TOPIC}]})

    code, output = _brook(
        bootstrap, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4"
    )
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current = json.loads(lines[1])
    assert current == {
        "version": 1,
        "partitions": [
            {"topic": TOPIC, "partition": p, "replicas": [1, 2, 3], "log_dirs": ["any"] * 3}
            for p in (0, 1)
        ],
    }
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    targets = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
    assert sorted(targets) == [0, 1]
    assert all(sorted(replicas) == [2, 3, 4] for replicas in targets.values())
    plan = _write(tmp_path / "plan.json", proposed)

    code, output = _brook(
        bootstrap, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000000"
    )
    assert code == 0, output
    assert "Save this to use as the --reassignment-json-file option during rollback" in output
    assert json.dumps(current, separators=(",", ":")) in output
    assert "--throttle is not applied" in output
    assert output.splitlines()[-1] == (
        f"Successfully started partition reassignments for {TOPIC}-0,{TOPIC}-1"
    )
    for partition, replicas in targets.items():
        zk.wait_data(
            f"/brokers/topics/{TOPIC}",
            lambda data, _, p=partition, r=replicas: data is not None and moved_to(zk, TOPIC, p, r),
        )
    code, output = _brook(bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert (code, output.splitlines()) == (
        0,
        [
            "Status of partition reassignment:",
            f"Reassignment of partition {TOPIC}-0 is completed.",
            f"Reassignment of partition {TOPIC}-1 is completed.",
        ],
    )
    assert _brook(bootstrap, "--list") == (0, "No partition reassignments found.\n")

    # Bad input: refused before anything changes.
    version = zk.get(f"/brokers/topics/{TOPIC}")[1].version
    for document, message in (
        ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
        (
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 2]}]},
            f"Partition replica lists may not contain duplicate entries: {TOPIC}-0 contains"
            " multiple entries for 2",
        ),
        (
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 9]}]},
            "Unknown broker id 9",
        ),
        (
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 5, "replicas": [2]}]},
            f"Unable to find partition: {TOPIC}-5",
        ),
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
    ):
        bad = _write(tmp_path / "bad.json", document)
        code, output = _brook(bootstrap, "--execute", "--reassignment-json-file", str(bad))
        assert code == 1 and message in output, output
    code, output = _brook(bootstrap, "--list", "--additional")
    assert code == 2 and "can't be used with action" in output
    code, output = _brook(bootstrap, "--generate", "--broker-list", "1,1")
    assert code == 2 and "topics-to-move-json-file" in output
    assert zk.get(f"/brokers/topics/{TOPIC}")[1].version == version


def test_a_held_move_listed_verified_refused_and_cancelled(
    cluster: Cluster, zk: ZooKeeperView, tmp_path: Path
):
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3]])
    brokers[3].stop(timeout=30)
    zk.wait_broker_ids([1, 2, 4])
    eventually(lambda: state_of(zk, TOPIC, 0)["isr"], lambda isr: 3 not in isr)
    bootstrap = brokers[1].bootstrap
    plan = _write(
        tmp_path / "plan.json",
        {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3, 4]}]},
    )
    # Started by hand: the tool, as Kafka's, refuses a plan naming a broker that is down.
    code, output = _brook(bootstrap, "--execute", "--reassignment-json-file", str(plan))
    assert code == 1 and "Unknown broker id 3" in output, output
    assert alter(brokers[4].port, {(TOPIC, 0): [2, 3, 4]})[1] == {
        (TOPIC, 0): (ErrorCode.none, None)
    }
    listed = f"{TOPIC}-0: replicas: 2,3,4,1. adding: 4. removing: 1."
    assert _brook(bootstrap, "--list") == (0, f"Current partition reassignments:\n{listed}\n")
    code, output = _brook(bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert output.splitlines()[1] == f"Reassignment of partition {TOPIC}-0 is still in progress."
    code, output = _brook(bootstrap, "--execute", "--reassignment-json-file", str(plan))
    assert code == 1 and "Use --additional to override this" in output
    assert _brook(bootstrap, "--cancel", "--reassignment-json-file", str(plan)) == (
        0,
        f"Successfully cancelled partition reassignment for: {TOPIC}-0\n",
    )
    assert moved_to(zk, TOPIC, 0, [2, 3, 1])
    code, output = _brook(bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert output.splitlines()[1] == (
        f"There is no active reassignment of partition {TOPIC}-0, but replica set is 2,3,1"
        " rather than 2,3,4."
    )
    assert _brook(bootstrap, "--cancel", "--reassignment-json-file", str(plan)) == (
        0,
        "None of the specified partition reassignments are active.\n",
    )
