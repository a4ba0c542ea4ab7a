"""The image tests: Brook's Dockerfile built with podman and run as a user would run it.

They share one podman store and one built image, so they are one xdist group (test.sh runs
pytest with `--dist loadgroup`): one worker builds the image once and runs them all. The first
build on a machine makes the base image too (a few minutes); later runs reuse it and the
cached layers (tests/image/podman.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .podman import (
    ULIMITS,
    Container,
    Podman,
    base_images,
    build_image,
    create_network,
    create_volume,
    ensure_base_image,
    remove_leftovers,
    store_lock,
    unique_name,
    why_podman_cannot_run,
)

IMAGE_TESTS = Path(__file__).parent
REPO = IMAGE_TESTS.parent.parent
DOCKERFILE = REPO / "Dockerfile"
# The only base the tests can make (mmdebstrap makes Debian).
BASE = "debian:bookworm-slim"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if IMAGE_TESTS in Path(item.path).parents:
            item.add_marker(pytest.mark.xdist_group("image"))
            # The first test also builds the image: the base, then Brook's layers.
            item.add_marker(pytest.mark.timeout(1200))


@pytest.fixture(scope="session")
def podman() -> Podman:
    reason = why_podman_cannot_run()
    if reason is not None:
        pytest.skip(reason)
    podman = Podman()
    info = podman("info", check=False)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run here: {info.stderr.strip()}")
    with store_lock():
        remove_leftovers(podman)
    return podman


@pytest.fixture(scope="session")
def image(podman: Podman) -> str:
    """The image built from this checkout's Dockerfile; its tag."""
    assert base_images(DOCKERFILE) == {BASE}, f"the tests can make {BASE} only"
    with store_lock():
        ensure_base_image(podman, BASE)
        # Whether this machine lets podman run a container at all (a kernel without the
        # namespaces or mounts it needs): the one place a failure is a reason to skip.
        probe = podman("run", "--rm", *ULIMITS, BASE, "true", check=False)
        if probe.returncode != 0:
            pytest.skip(f"podman cannot run a container here: {probe.stderr.strip()}")
        return build_image(podman, REPO)


@pytest.fixture
def containers(podman: Podman) -> Iterator[list[Container]]:
    """The containers a test starts, removed (by name) at teardown."""
    started: list[Container] = []
    try:
        yield started
    finally:
        for container in started:
            container.remove()


@pytest.fixture
def volume(podman: Podman) -> Iterator[str]:
    """A fresh named volume, removed at teardown."""
    name = create_volume(podman, unique_name("data"))
    try:
        yield name
    finally:
        podman("volume", "rm", "--force", name, check=False)


@pytest.fixture
def network(podman: Podman) -> Iterator[str]:
    """A fresh user-defined network, removed at teardown with any container still on it."""
    name = create_network(podman, unique_name("net"))
    try:
        yield name
    finally:
        podman("network", "rm", "--force", name, check=False)
