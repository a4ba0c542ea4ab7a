"""The length walk that runs before kio's reader: it ends where kio ends on every valid
request, and refuses every lying array length before kio can allocate for it."""

from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from integration.kio_strategies import encode, entity
from integration.lying_lengths import every_lying_frame, filled, header, length_variants, lie
from kio.serial import entity_reader

from brook.protocol.api_table import SERVED, request_type
from brook.protocol.errors import InvalidRequestError
from brook.protocol.length_bounds import check_lengths
from brook.protocol.wire import decode_request

SERVED_VERSIONS = [
    (api, version)
    for api, served in SERVED.items()
    for version in range(served.min_version, served.max_version + 1)
]
# The lying frames ask kio for up to 32 GiB; under this address-space limit that
# allocation fails on any machine (with overcommit, 16 GiB could succeed on a large one).
CHILD_ADDRESS_SPACE = 3 << 30


@pytest.mark.parametrize(
    ("api", "version"), SERVED_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in SERVED_VERSIONS]
)
def test_walk_ends_where_kio_ends(api, version):
    request_class = request_type(api, version)

    @settings(
        max_examples=25,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(entity(request_class))
    def walk_matches(request):
        data = b"\x00\x01\x02" + encode(request)
        _, size = entity_reader(request_class)(data, 3)
        assert check_lengths(request_class, data, 3) == 3 + size

    walk_matches()


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@pytest.mark.parametrize("size", [0, 1, 126, 127, 128, 16382, 16383, 16384, 70000, None])
def test_walk_follows_long_lengths(version, size):
    """Lengths of one, two and three varint bytes (the walk inlines the first two)."""
    request_class = request_type(0, version)
    module = sys.modules[request_class.__module__]
    records = None if size is None else bytes(range(256)) * (size // 256) + b"r" * (size % 256)
    request = request_class(
        transactional_id="t" * ((size or 0) % 300),
        acks=1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=tuple(
            module.TopicProduceData(
                name="n" * 200,
                partition_data=(module.PartitionProduceData(index=i, records=records),) * 3,
            )
            for i in range(2)
        ),
    )
    data = encode(request) + b"trailing bytes are not walked"
    _, size_read = entity_reader(request_class)(data, 0)
    assert check_lengths(request_class, data, 0) == size_read


@pytest.mark.parametrize(
    ("api", "version"), SERVED_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in SERVED_VERSIONS]
)
def test_null_only_where_the_schema_allows_it(api, version):
    """kio reads null for any array; Kafka's readers refuse it where the schema does not
    allow it ("non-nullable field ... was serialized as null"), and so does Brook now
    (the fuzzer found handlers failing on such nulls)."""
    request_class = request_type(api, version)
    prefix = header(api, version)
    for path, kind, one, two in length_variants(filled(request_class)):
        if kind != "array":
            continue
        entity_name, field_name = path.split(".")
        frame = prefix + lie(one, two, kind, null=True)
        if _array_is_nullable(request_class, entity_name, field_name):
            decode_request(frame)  # a null array where one may be null parses
        else:
            with pytest.raises(InvalidRequestError, match=f"non-nullable field {path} was"):
                decode_request(frame)


def _array_is_nullable(request_class: type, entity_name: str, field_name: str) -> bool:
    entity_type = getattr(sys.modules[request_class.__module__], entity_name)
    return "None" in str(entity_type.__dataclass_fields__[field_name].type).rsplit("]", 1)[-1]


def test_every_array_length_that_lies_is_refused_before_kio_allocates():
    """In a child process with a small address space, so that a regression shows as
    that child aborting instead of taking pytest with it."""

    def limit_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))

    child = subprocess.run(
        [sys.executable, __file__],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_address_space,
        # The helpers live in tests/integration, importable from tests/ as under pytest.
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert child.returncode == 0, f"child exited {child.returncode}: {child.stderr[-3000:]}"
    report = json.loads(child.stdout)
    assert report["parsed"] == [], "lying lengths that parsed"
    assert report["wrong_message"] == []
    # Every array field of every served version got a lying length (236 with kio 0.6.5).
    arrays = {(f.api.name, f.version, f.path) for f in every_lying_frame() if f.kind == "array"}
    assert report["arrays_refused"] == len(arrays) > 200
    assert report["refused"] == len(every_lying_frame())


def _decode_every_lying_frame() -> dict[str, object]:
    from brook.protocol.wire import decode_request

    parsed, wrong_message, refused, arrays = [], [], 0, 0
    for lying in every_lying_frame():
        try:
            decode_request(lying.frame)
        except InvalidRequestError as exc:
            refused += 1
            if lying.kind == "array":
                arrays += 1
                if f"{lying.path}: an array of" not in exc.message:
                    wrong_message.append(f"{lying}: {exc.message}")
        else:
            parsed.append(str(lying))
    return {
        "parsed": parsed,
        "wrong_message": wrong_message,
        "refused": refused,
        "arrays_refused": arrays,
    }


if __name__ == "__main__":
    print(json.dumps(_decode_every_lying_frame()))
