"""Podman for the image tests: a container store of the tests' own, the base image the
Dockerfile names made on this machine, the image built from this checkout, and containers.

No Docker engine runs here and the public registry is out of reach, so:
- the store lives under the user's cache (~/.cache/brook-tests/podman), apart from any images
  of the user's: the base image made here carries the official name `debian:bookworm-slim`
  (so the Dockerfile builds unchanged) and must never shadow a real one;
- that base is made by mmdebstrap from Debian's mirror, as debian:bookworm-slim is made
  (minbase, documentation excluded, apt's caches off), and kept: later runs reuse it and the
  build's cached layers, so only the layers after a source change are built again.

Every container, network and volume carries the label `brook-tests.owner=<pid>` of the pytest
process that made it; a later run removes those whose process is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "brook-tests"
OWNER_LABEL = "brook-tests.owner"

# Every build and run: the default open-file and process limits (the host's) cannot be set
# inside containers on some machines, runc then fails with "error setting rlimits".
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")

# Debian 12 as debian:bookworm-slim has it: its three suites, dpkg told to skip documentation
# (the slim part) and apt to keep no package caches or downloaded .debs in the image.
DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/locale/*",
)
_APT_CLEAN = (
    '"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb'
    ' /var/cache/apt/*.bin || true";'
)
APT_DOCKER_CLEAN = (
    f"DPkg::Post-Invoke {{ {_APT_CLEAN} }};\n"
    f"APT::Update::Post-Invoke {{ {_APT_CLEAN} }};\n"
    'Dir::Cache::pkgcache "";\n'
    'Dir::Cache::srcpkgcache "";\n'
    'Acquire::Languages "none";\n'
)
# The official image's PATH and command; an imported image has neither.
BASE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    'CMD ["bash"]',
)
# Debian refreshes debian:bookworm-slim about monthly; so do the tests.
BASE_MAX_AGE_S = 30 * 24 * 3600


class PodmanError(AssertionError):
    pass


def find_program(name: str) -> str | None:
    """A program on PATH or in the sbin directories, which a non-root PATH may lack."""
    return shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin")


def why_podman_cannot_run() -> str | None:
    """The reason podman cannot run containers on this machine, or None when it can.

    Only what is missing from the machine counts here; once podman can run, any later
    failure is a failure of the image or of these tests.
    """
    if find_program("podman") is None:
        return "podman is not installed (./test.sh installs Debian's podman with apt-get)"
    if find_program("mmdebstrap") is None:
        return "mmdebstrap, which makes the base image, is not installed (./test.sh installs it)"
    if os.geteuid() != 0:
        # Rootless podman runs containers in a user namespace mapped to subordinate ids.
        limit = Path("/proc/sys/user/max_user_namespaces")
        if limit.exists() and limit.read_text().strip() == "0":
            return "user namespaces are disabled (user.max_user_namespaces = 0)"
        clone = Path("/proc/sys/kernel/unprivileged_userns_clone")
        if clone.exists() and clone.read_text().strip() == "0":
            return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone)"
        if find_program("newuidmap") is None:
            return "newuidmap is missing (Debian's uidmap package), which rootless podman needs"
        user = _user_name()
        subuid = Path("/etc/subuid")
        ranges = subuid.read_text().splitlines() if subuid.exists() else []
        if not any(line.split(":")[0] in (user, str(os.geteuid())) for line in ranges):
            return f"no subordinate uid range for {user} in /etc/subuid (rootless podman needs one)"
    return None


def _user_name() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


@dataclass
class Podman:
    """podman with the tests' own store; every command returns its CompletedProcess."""

    root: Path = CACHE_DIR / "podman" / "storage"
    # Run state belongs where a reboot empties it, as /run is for podman's own; one fixed
    # path per user, since podman refuses a store whose run root moved.
    runroot: Path = Path(tempfile.gettempdir()) / f"brook-tests-podman-{os.geteuid()}"
    runtime: str | None = field(default_factory=lambda: find_program("runc"))

    def command(self, *args: str) -> list[str]:
        program = find_program("podman")
        assert program is not None
        command = [program, "--root", str(self.root), "--runroot", str(self.runroot / "run")]
        command += ["--tmpdir", str(self.runroot / "libpod")]
        if self.runtime is not None:
            # crun refuses the hybrid cgroup layout of some machines; runc runs on all of them.
            command += ["--runtime", self.runtime]
        return [*command, *args]

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise PodmanError(
                f"podman {' '.join(args)} exited with {result.returncode}:\n{result.stderr}"
            )
        return result

    def inspect(self, kind: str, name: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(self(kind, "inspect", name).stdout)
        return found[0]

    def exists(self, kind: str, name: str) -> bool:
        return self(kind, "exists", name, check=False).returncode == 0


@contextlib.contextmanager
def store_lock() -> Iterator[None]:
    """Builds, imports and prunes of the shared store, one at a time across test runs."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def base_images(dockerfile: Path) -> set[str]:
    """The images the Dockerfile's stages start from, stages named in it left out."""
    stages: set[str] = set()
    images: set[str] = set()
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM":
            image = words[1]
            if image not in stages:
                images.add(image)
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3])
    return images


def ensure_base_image(podman: Podman, name: str) -> None:
    """Make `name` (debian:bookworm-slim) in the store unless a fresh one is there."""
    if podman.exists("image", name):
        created = podman("image", "inspect", "--format", "{{.Created.Unix}}", name).stdout
        if time.time() - int(created) < BASE_MAX_AGE_S:
            return
    tarball = CACHE_DIR / f"base-{uuid.uuid4().hex}.tar"
    # The caches apt made before docker-clean was there go too: mmdebstrap's own cleanup
    # looks for them where docker-clean says there are none.
    hook = (
        f"cat > \"$1/etc/apt/apt.conf.d/docker-clean\" <<'EOF'\n{APT_DOCKER_CLEAN}EOF\n"
        'rm -f "$1"/var/cache/apt/*.bin'
    )
    command = ["mmdebstrap", "--variant=minbase", "--mode=auto"]
    # Merged /usr as Debian 12 has it, without the usrmerge package (which pulls in perl).
    command += ["--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr"]
    command += [f"--dpkgopt={option}" for option in DPKG_EXCLUDES]
    command += [f"--customize-hook={hook}", DEBIAN_SUITE, str(tarball), *DEBIAN_SOURCES]
    try:
        made = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if made.returncode != 0:
            raise PodmanError(f"mmdebstrap could not make {name}:\n{made.stderr[-4000:]}")
        changes = [arg for change in BASE_CHANGES for arg in ("--change", change)]
        podman("import", *changes, str(tarball), _qualified(name), timeout=300)
    finally:
        tarball.unlink(missing_ok=True)


def _qualified(name: str) -> str:
    """Docker's short names resolve to Docker Hub's library; podman's do not without config."""
    if "/" not in name:
        return f"docker.io/library/{name}"
    return name


def ca_bundle() -> Path | None:
    """The host's CA bundle, which pip in the build needs where HTTPS goes through a proxy
    that the host trusts (the Dockerfile's `extra_ca` build secret)."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("REQUESTS_CA_BUNDLE"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def build_image(
    podman: Podman, context: Path, dockerfile: Path | None = None, name: str = "brook-test"
) -> str:
    """Build `dockerfile` (the context's Dockerfile by default) in `context`; returns the
    image's tag, localhost/<name>:<a key of the context and Dockerfile>.

    A multi-stage Dockerfile's build stage is tagged too, so that pruning the images earlier
    builds left untagged keeps its cached layers (Debian's venv package, the venv) for the
    next build.
    """
    dockerfile = dockerfile or context / "Dockerfile"
    where = f"{context.resolve()}\0{dockerfile.resolve()}"
    if dockerfile == context / "Dockerfile":
        where = str(context.resolve())  # the key earlier runs used, so their cache is found
    key = hashlib.sha256(where.encode()).hexdigest()[:12]
    tag = f"localhost/{name}:{key}"
    args = ["build", "--format", "docker", "--pull=never", "--force-rm", "--network", "host"]
    args += [*ULIMITS, "--file", str(dockerfile)]
    bundle = ca_bundle()
    if bundle is not None:
        # README's way through a TLS-intercepting proxy: the CA as the build's secret.
        args += ["--secret", f"id=extra_ca,src={bundle}"]
    if "build" in _stage_names(dockerfile):
        build_stage = f"localhost/{name}-build:{key}"
        podman(*args, "--target", "build", "--tag", build_stage, str(context), timeout=900)
    podman(*args, "--tag", tag, str(context), timeout=900)
    podman("image", "prune", "--force", timeout=300)
    return tag


def _stage_names(dockerfile: Path) -> set[str]:
    names: set[str] = set()
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if len(words) >= 4 and words[0].upper() == "FROM" and words[2].upper() == "AS":
            names.add(words[3])
    return names


def remove_leftovers(podman: Podman) -> None:
    """Containers, networks and volumes of test runs whose pytest process is gone (containers
    first: a network or volume in use cannot go)."""
    for kind, listing in (("container", ("ps", "--all")), ("volume", ("volume", "ls"))):
        name_field = "{{.Names}}" if kind == "container" else "{{.Name}}"
        template = f'{name_field} {{{{index .Labels "{OWNER_LABEL}"}}}}'
        listed = podman(*listing, "--filter", f"label={OWNER_LABEL}", "--format", template)
        for line in listed.stdout.splitlines():
            name, _, owner = line.partition(" ")
            if owner.isdigit() and not _alive(int(owner)):
                if kind == "container":
                    podman("rm", "--force", "--time", "0", name, check=False)
                else:
                    podman("volume", "rm", "--force", name, check=False)
        if kind == "container":
            _remove_leftover_networks(podman)


def _remove_leftover_networks(podman: Podman) -> None:
    # `network ls` has no Go-template access to one label; its JSON has them all.
    listed = podman("network", "ls", "--filter", f"label={OWNER_LABEL}", "--format", "json")
    for network in json.loads(listed.stdout or "[]"):
        name = network.get("name") or network.get("Name")
        labels = network.get("labels") or network.get("Labels") or {}
        owner = labels.get(OWNER_LABEL, "")
        if name and owner.isdigit() and not _alive(int(owner)):
            podman("network", "rm", "--force", name, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unique_name(prefix: str) -> str:
    return f"brook-test-{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class Container:
    """A container the tests started; `logs` is what the broker wrote (stdout and stderr)."""

    podman: Podman
    name: str

    def logs(self) -> str:
        result = self.podman("logs", self.name)
        return result.stdout + result.stderr

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = self.podman.inspect("container", self.name)["State"]
        return state

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 60) -> str:
        """Poll the container's log until `text` occurs `count` times; fail if it exits."""
        deadline = time.monotonic() + timeout
        while True:
            logs = self.logs()
            if logs.count(text) >= count:
                return logs
            if not self.state().get("Running"):
                raise AssertionError(f"{self.name} exited before logging {text!r}:\n{logs}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not log {text!r} in {timeout} s:\n{logs}")
            time.sleep(0.1)

    def wait_for_exit(self, timeout: float = 60) -> int:
        result = self.podman("wait", self.name, timeout=timeout)
        return int(result.stdout.strip().splitlines()[-1])

    def stop(self, timeout_s: int = 30) -> int:
        """`docker stop`: SIGTERM, SIGKILL after `timeout_s`; returns the exit code."""
        self.podman("stop", "--time", str(timeout_s), self.name, timeout=timeout_s + 30)
        return int(self.state()["ExitCode"])

    def start(self) -> None:
        self.podman("start", self.name)

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return self.podman("exec", self.name, *command)

    def remove(self) -> None:
        # --volumes: the anonymous volume of the image's VOLUME too (named ones stay).
        self.podman("rm", "--force", "--time", "0", "--volumes", self.name, check=False)


def run_container(
    podman: Podman,
    image: str,
    *,
    name: str,
    ports: Sequence[str] = (),
    volumes: Sequence[str] = (),
    env: dict[str, str] | None = None,
    user: str | None = None,
    network: str | None = None,
    aliases: Sequence[str] = (),
    hostname: str | None = None,
    hosts: Mapping[str, str] | None = None,
    entrypoint: str | None = None,
    command: Sequence[str] = (),
) -> Container:
    """`docker run -d` with the tests' limits and owner label. The image's health check is
    kept but its timer off (`podman healthcheck run` runs it): the timer needs systemd.
    `hosts` are /etc/hosts entries (`--add-host`), name to address."""
    args = ["run", "--detach", "--name", name, "--label", f"{OWNER_LABEL}={os.getpid()}"]
    args += [*ULIMITS, "--health-interval", "disable"]
    for port in ports:
        args += ["--publish", port]
    for volume in volumes:
        args += ["--volume", volume]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    if user is not None:
        args += ["--user", user]
    if network is not None:
        args += ["--network", network]
    for alias in aliases:
        args += ["--network-alias", alias]
    if hostname is not None:
        args += ["--hostname", hostname]
    for host, address in (hosts or {}).items():
        args += ["--add-host", f"{host}:{address}"]
    if entrypoint is not None:
        args += ["--entrypoint", entrypoint]
    podman(*args, image, *command)
    return Container(podman, name)


def create_volume(podman: Podman, name: str) -> str:
    podman("volume", "create", "--label", f"{OWNER_LABEL}={os.getpid()}", name)
    return name


def create_network(podman: Podman, name: str) -> str:
    """A user-defined network, whose DNS resolves each container's name, hostname and
    aliases for the others (as Docker's does)."""
    podman("network", "create", "--label", f"{OWNER_LABEL}={os.getpid()}", name)
    return name
