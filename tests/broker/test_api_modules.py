"""Every served API has its handler module, named after its key: the broker imports a
module on its API's first request, so a missing or misnamed one would fail only then."""

from __future__ import annotations

import datetime
import subprocess
import sys

import pytest
from kio.index import load_response_schema

from brook.broker.apis import HANDLERS, build, handler_for, load_all
from brook.protocol.api_table import SERVED, ApiKey, response_type
from brook.protocol.errors import ErrorCode


def test_every_served_api_has_a_handler_module_named_after_it():
    load_all()
    for api_key in SERVED:
        assert handler_for(api_key) is HANDLERS[api_key]


def test_a_broker_imports_no_api_module_before_its_first_request():
    probe = (
        "import sys, tempfile, pathlib;"
        "from brook.broker.testing import BrokerThread;"
        "b = BrokerThread(pathlib.Path(tempfile.mkdtemp())).start();"
        "loaded = [m for m in sys.modules if m.startswith('brook.broker.apis.')];"
        "b.stop();"
        "print(','.join(sorted(loaded)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


def test_build_drops_the_fields_a_version_lacks_and_refuses_a_misspelt_one():
    """A handler gives every version's fields; each version keeps its own. A name that
    no version of the message has is a misspelling: the handler must not answer
    without the field it meant."""
    v0 = load_response_schema(ApiKey.INIT_PRODUCER_ID, 0)
    # throttle_time is in every version; producer_epoch in every; a v0 has all of these.
    built = build(
        v0,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        producer_id=1,
        producer_epoch=0,
    )
    assert built.producer_id == 1
    # OffsetCommit v2 lacks throttle_time (v3+): dropped, not refused.
    offsets_v0 = load_response_schema(ApiKey.OFFSET_COMMIT, 2)
    assert build(offsets_v0, throttle_time=datetime.timedelta(0), topics=()).topics == ()
    with pytest.raises(TypeError, match="no field producer_epoc in any version"):
        build(
            v0,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            producer_id=1,
            producer_epoch=0,
            producer_epoc=0,
        )
    # Brook's own schemas (ControlledShutdown, one module, a class per version) too.
    v1 = response_type(ApiKey.CONTROLLED_SHUTDOWN, 1)
    assert build(v1, error_code=ErrorCode.none, remaining_partitions=()).remaining_partitions == ()
    with pytest.raises(TypeError, match="remaining_partition "):
        build(v1, error_code=ErrorCode.none, remaining_partition=())
