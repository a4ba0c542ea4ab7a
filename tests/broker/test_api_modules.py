"""Every served API has its handler module, named after its key: the broker imports a
module on its API's first request, so a missing or misnamed one would fail only then."""

from __future__ import annotations

import subprocess
import sys

from brook.broker.apis import HANDLERS, handler_for, load_all
from brook.protocol.api_table import SERVED


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
