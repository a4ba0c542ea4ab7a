"""A compose file brought up with podman, from the file's own content, for the image tests.

No podman-compose honours `depends_on: condition: service_healthy` here: Debian 12's (1.0.3)
ignores conditions, PyPI's skips the wait with a podman older than 4.6 (Debian 12 has 4.3),
and where it waits it does so with `podman wait --condition=healthy`, which relies on podman
running health checks on systemd timers: without systemd a container's health stays
"starting" for ever. So this reads the file as `docker compose up --wait` does and makes the
same objects with podman:

- a network `<project>_default` on which each service's container is reachable by its
  service name (a network alias) and its `hostname:`, and its dependencies' names are in
  its /etc/hosts too (see `dependency_addresses`);
- a volume per top-level `volumes:` entry, `<project>_<name>`;
- an image per `build:` (context and Dockerfile relative to the file), by the tests' build;
- the containers in `depends_on` order, a `condition: service_healthy` dependency's health
  check run until it passes before its dependents start, and every service with a health
  check healthy before `up` returns. The check is the service's `healthcheck:` run in its
  container as Docker runs it (`podman exec`: podman 4.3's --health-cmd splits a command on
  spaces, so a `bash -c` script cannot pass through it), or else the image's HEALTHCHECK
  (`podman healthcheck run`).

`${VAR}` and `${VAR:-default}` are interpolated from the mapping given, as compose does from
the environment. Anything the file says that this driver does not implement is an error,
not ignored, so that the tests never pass on a file that Docker would run differently.
Every container, network and volume carries the tests' owner label, and `down` removes them.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .podman import Container, Podman, create_network, create_volume, run_container

# What a service may say; anything else fails the test (see the module's docstring).
SERVICE_KEYS = {
    "build",
    "image",
    "hostname",
    "ports",
    "environment",
    "volumes",
    "depends_on",
    "healthcheck",
}
BUILD_KEYS = {"context", "dockerfile"}
# A health check's settings: `test` is run as Docker runs it, bounded by `timeout`; the
# others are the timer's, which the driver replaces by running the check until it passes.
HEALTHCHECK_KEYS = {"test", "timeout", "interval", "start_period", "retries"}
CONDITIONS = {"service_started", "service_healthy"}
HEALTHY_TIMEOUT_S = 120.0

# ${VAR}, ${VAR:-default}, and $$ for a literal $: the forms the file may use.
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ComposeError(AssertionError):
    pass


def interpolate(value: Any, variables: Mapping[str, str]) -> Any:
    """`value` with every string's variables replaced, as compose interpolates the file."""
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if variables.get(name) or (name in variables and default is None):
            return variables[name]
        if default is None:
            raise ComposeError(f"${{{name}}} is not set and has no default")
        return default

    result = _VARIABLE.sub(replace, value)
    if "$" in _VARIABLE.sub("", value):
        raise ComposeError(f"a variable form this driver does not implement: {value!r}")
    return result


@dataclass
class Service:
    name: str
    spec: dict[str, Any]

    @property
    def depends_on(self) -> dict[str, str]:
        """The services this one waits for, with the condition it waits on."""
        depends = self.spec.get("depends_on") or {}
        if isinstance(depends, list):
            return {name: "service_started" for name in depends}
        conditions: dict[str, str] = {}
        for name, how in depends.items():
            if set(how or {}) - {"condition"}:
                raise ComposeError(f"{self.name}: depends_on {name}: {how} not implemented")
            conditions[name] = (how or {}).get("condition", "service_started")
        for name, condition in conditions.items():
            if condition not in CONDITIONS:
                raise ComposeError(f"{self.name}: depends_on {name}: condition {condition!r}")
        return conditions

    @property
    def healthcheck(self) -> tuple[list[str], float] | None:
        """The service's own `healthcheck:` as the command to run in its container and its
        timeout in seconds; None where the image's HEALTHCHECK holds."""
        spec = self.spec.get("healthcheck")
        if spec is None:
            return None
        unknown = set(spec) - HEALTHCHECK_KEYS
        if unknown:
            raise ComposeError(f"{self.name}: healthcheck keys not implemented: {unknown}")
        test = spec["test"]
        timeout = _seconds(spec.get("timeout", "30s"))
        if isinstance(test, list) and test[0] == "CMD":
            return test[1:], timeout
        if isinstance(test, list) and test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", *test[1:]], timeout
        if isinstance(test, str):
            return ["/bin/sh", "-c", test], timeout
        raise ComposeError(f"{self.name}: healthcheck test {test!r} not implemented")

    @property
    def environment(self) -> dict[str, str]:
        environment = self.spec.get("environment") or {}
        if not isinstance(environment, dict):
            raise ComposeError(f"{self.name}: environment as a list is not implemented")
        return {key: str(value) for key, value in environment.items()}


@dataclass
class ComposeProject:
    """One compose file brought up as project `project` (a unique name per test)."""

    podman: Podman
    file: Path
    project: str
    variables: Mapping[str, str] = field(default_factory=dict)
    services: dict[str, Service] = field(init=False)
    volumes: list[str] = field(init=False)
    containers: dict[str, Container] = field(init=False, default_factory=dict)
    network: str | None = field(init=False, default=None)
    made_volumes: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        document = interpolate(yaml.safe_load(self.file.read_text()), self.variables)
        unknown = {key for key in document if not key.startswith("x-")}
        unknown -= {"name", "services", "volumes"}
        if unknown:
            raise ComposeError(f"top-level keys this driver does not implement: {unknown}")
        self.services = {}
        for name, spec in document["services"].items():
            extra = set(spec) - SERVICE_KEYS
            if extra:
                raise ComposeError(f"{name}: keys this driver does not implement: {extra}")
            build = spec.get("build")
            if build is None:
                # The public registry is out of reach here: every image is built.
                raise ComposeError(f"{name}: only services built from a Dockerfile are run")
            if isinstance(build, dict) and set(build) - BUILD_KEYS:
                raise ComposeError(f"{name}: build keys this driver does not implement")
            self.services[name] = Service(name, spec)
        volumes = document.get("volumes") or {}
        for name, options in volumes.items():
            if options:
                raise ComposeError(f"volume {name}: options are not implemented: {options}")
        self.volumes = list(volumes)

    def container_name(self, service: str) -> str:
        # Compose's own naming: <project>-<service>-<replica>.
        return f"{self.project}-{service}-1"

    def build_contexts(self) -> dict[str, tuple[Path, Path]]:
        """For each service built from a Dockerfile: its context and Dockerfile."""
        contexts: dict[str, tuple[Path, Path]] = {}
        for name, service in self.services.items():
            build = service.spec.get("build")
            if build is None:
                continue
            if isinstance(build, str):
                build = {"context": build}
            context = (self.file.parent / build.get("context", ".")).resolve()
            contexts[name] = (context, context / build.get("dockerfile", "Dockerfile"))
        return contexts

    def start_order(self) -> list[str]:
        """Services after those they depend on (compose's order), cycles refused."""
        order: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in order:
                return
            if name in visiting:
                raise ComposeError(f"depends_on cycle through {name}")
            if name not in self.services:
                raise ComposeError(f"depends_on names no service: {name}")
            visiting.add(name)
            for dependency in self.services[name].depends_on:
                visit(dependency)
            visiting.discard(name)
            order.append(name)

        for name in self.services:
            visit(name)
        return order

    def up(self, build: Callable[[Path, Path, str], str]) -> None:
        """`docker compose up --wait`: build, make the network and volumes, start the
        services in order and wait until each one with a health check is healthy.
        `build(context, dockerfile, image)` builds an image and returns its tag."""
        images: dict[str, str] = {}
        built: dict[tuple[Path, Path], str] = {}
        for name, where in self.build_contexts().items():
            if where not in built:
                built[where] = build(*where, self.services[name].spec.get("image", name))
            images[name] = built[where]
        self.network = create_network(self.podman, f"{self.project}_default")
        for volume in self.volumes:
            self.made_volumes.append(create_volume(self.podman, f"{self.project}_{volume}"))
        for name in self.start_order():
            for dependency, condition in self.services[name].depends_on.items():
                if condition == "service_healthy":
                    self.wait_healthy(dependency)
            self.start(name, images[name])
        for name in self.services:
            if self.has_healthcheck(name):
                self.wait_healthy(name)

    def start(self, name: str, image: str) -> Container:
        service = self.services[name]
        volumes = []
        for mount in service.spec.get("volumes") or []:
            source, _, target = mount.partition(":")
            if source not in self.volumes:
                raise ComposeError(f"{name}: only named volumes are implemented: {mount}")
            volumes.append(f"{self.project}_{source}:{target}")
        container = run_container(
            self.podman,
            image,
            name=self.container_name(name),
            ports=service.spec.get("ports") or [],
            volumes=volumes,
            env=service.environment,
            network=self.network,
            aliases=[name],
            hostname=service.spec.get("hostname"),
            hosts=self.dependency_addresses(name),
        )
        self.containers[name] = container
        return container

    def dependency_addresses(self, name: str) -> dict[str, str]:
        """The service's dependencies by name (and hostname) to their addresses, for its
        /etc/hosts. Docker's DNS would answer these; podman 4.3's aardvark-dns (1.4) tears
        its sockets down and up again on each reload, which every container joining the
        network causes (containers/aardvark-dns#389), and a broker starting beside its
        siblings lost every lookup of `zookeeper` for 40 s in a CI run and exited. A
        dependency is started before its dependents and not restarted by the tests, so its
        address holds; lookups of anything else still go to the network's DNS."""
        hosts: dict[str, str] = {}
        for dependency in self.services[name].depends_on:
            networks = self.podman.inspect("container", self.container_name(dependency))[
                "NetworkSettings"
            ]["Networks"]
            address = networks[self.network]["IPAddress"]
            hosts[dependency] = address
            hostname = self.services[dependency].spec.get("hostname")
            if hostname:
                hosts[hostname] = address
        return hosts

    def has_healthcheck(self, name: str) -> bool:
        if self.services[name].healthcheck is not None:
            return True
        config = self.podman.inspect("container", self.container_name(name))["Config"]
        return bool(config.get("Healthcheck"))

    def check_health(self, name: str) -> tuple[bool, str]:
        """One run of the service's health check: the file's, run in the container as
        Docker runs it, or the image's (`podman healthcheck run`)."""
        container = self.containers[name]
        own = self.services[name].healthcheck
        if own is None:
            check = self.podman("healthcheck", "run", container.name, check=False)
        else:
            command, timeout = own
            try:
                check = self.podman("exec", container.name, *command, check=False, timeout=timeout)
            except subprocess.TimeoutExpired:
                return False, f"no answer in {timeout} s"
        return check.returncode == 0, check.stdout + check.stderr

    def wait_healthy(self, name: str) -> None:
        """Run the service's health check until it passes (podman runs none on a timer
        here); fail if the container exits first."""
        container = self.containers[name]
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while True:
            healthy, output = self.check_health(name)
            if healthy:
                return
            if not container.state().get("Running"):
                raise ComposeError(f"{name} exited before it was healthy:\n{container.logs()}")
            if time.monotonic() > deadline:
                raise ComposeError(f"{name} not healthy in {HEALTHY_TIMEOUT_S} s:\n{output}")
            time.sleep(0.5)

    def down(self) -> None:
        """`docker compose down -v`: the containers, the network and the volumes."""
        for container in reversed(list(self.containers.values())):
            container.remove()
        if self.network is not None:
            self.podman("network", "rm", "--force", self.network, check=False)
        for volume in self.made_volumes:
            self.podman("volume", "rm", "--force", volume, check=False)


def _seconds(duration: str) -> float:
    """A compose duration (`5s`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ComposeError(f"a duration this driver does not read: {duration!r}")
    return sum(float(number) * units[unit] for number, unit in parts)
