"""`brook faults`: arm, list and clear faults on a broker with an admin endpoint.

    brook faults add --admin-url http://127.0.0.1:9644 --api Produce \\
        --error NOT_LEADER_OR_FOLLOWER --count 3 --topic orders --partition 0
    brook faults add --admin-url ... --json '{"api": "Fetch", "delay_ms": 500}'
    brook faults list --admin-url ...
    brook faults clear --admin-url ...

It speaks the admin endpoint's HTTP+JSON (`admin.listener` on the broker), the same
interface any language's tests use. The broker serves faults only with
admin.fault.injection.enable=true. A secured broker's endpoint asks for its token
(--admin-token, or BROOK_ADMIN_TOKEN) or a broker user's name and password
(--admin-user, with BROOK_ADMIN_PASSWORD); https is checked against --admin-ca.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "faults",
        help="inject faults into a running broker (needs its admin.listener)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "action",
        choices=["add", "list", "clear"],
        help="add a fault, list the faults in force, or clear them all",
    )
    parser.add_argument(
        "--admin-url",
        required=True,
        metavar="URL",
        help="the broker's admin endpoint, its admin.listener (http[s]://HOST:PORT)",
    )
    auth = parser.add_argument_group("a secured endpoint")
    auth.add_argument(
        "--admin-token",
        default=os.environ.get("BROOK_ADMIN_TOKEN"),
        metavar="TOKEN",
        help="the broker's admin.auth.token (default: $BROOK_ADMIN_TOKEN)",
    )
    auth.add_argument(
        "--admin-user",
        metavar="USER",
        help="log in as this broker user (SASL/PLAIN or SCRAM), password in $BROOK_ADMIN_PASSWORD",
    )
    auth.add_argument("--admin-ca", metavar="FILE", help="CA certificates (PEM) to check https by")
    spec = parser.add_argument_group("a fault (add)")
    spec.add_argument("--json", metavar="JSON", help="the fault as the endpoint takes it")
    spec.add_argument("--api", help="the API it applies to, by Kafka's name (Produce, Fetch, ...)")
    spec.add_argument("--error", help="the error to answer, by Kafka's name")
    spec.add_argument("--count", type=int, help="how many requests (default: until cleared)")
    spec.add_argument(
        "--topic", help="only requests (or appends) for this topic (default: any topic)"
    )
    spec.add_argument(
        "--partition", type=int, help="only this partition of --topic (default: any partition)"
    )
    spec.add_argument("--delay-ms", type=int, help="hold each matching request this long")
    spec.add_argument(
        "--close",
        choices=["after_response", "mid_response"],
        help="close the connection after the response or half-way through it",
    )
    spec.add_argument(
        "--refuse-connections", action="store_true", help="drop new connections (broker down)"
    )
    spec.add_argument(
        "--pause-appends", action="store_true", help="hold a partition's appends (stalled disk)"
    )
    spec.add_argument("--duration-ms", type=int, help="how long a refusal or a pause lasts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    base = args.admin_url.rstrip("/") + "/v1/faults"
    try:
        access = _Access(_authorization(args), _tls(args.admin_ca))
        if args.action == "list":
            return _print(_call("GET", base, access))
        if args.action == "clear":
            return _print(_call("DELETE", base, access))
        return _print(_call("POST", base, access, _spec(args)))
    except _Refused as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _spec(args: argparse.Namespace) -> Any:
    if args.json is not None:
        try:
            return json.loads(args.json)
        except json.JSONDecodeError as exc:
            raise _Refused(f"--json is not JSON: {exc}") from None
    spec: dict[str, Any] = {}
    for name in ("api", "error", "count", "topic", "partition", "delay_ms", "close"):
        value = getattr(args, name)
        if value is not None:
            spec[name] = value
    if args.duration_ms is not None:
        spec["duration_ms"] = args.duration_ms
    if args.refuse_connections:
        spec["refuse_connections"] = True
    if args.pause_appends:
        spec["pause_appends"] = True
    return spec


class _Refused(Exception):
    pass


class _Access:
    def __init__(self, authorization: str | None, tls: ssl.SSLContext | None) -> None:
        self.authorization = authorization
        self.tls = tls


def _authorization(args: argparse.Namespace) -> str | None:
    if args.admin_token:
        return f"Bearer {args.admin_token}"
    if args.admin_user:
        password = os.environ.get("BROOK_ADMIN_PASSWORD")
        if password is None:
            raise _Refused("--admin-user needs the password in BROOK_ADMIN_PASSWORD")
        pair = f"{args.admin_user}:{password}".encode()
        return "Basic " + base64.b64encode(pair).decode()
    return None


def _tls(ca_file: str | None) -> ssl.SSLContext | None:
    if ca_file is None:
        return None
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise _Refused(f"cannot read --admin-ca {ca_file}: {exc}") from None


def _call(method: str, url: str, access: _Access, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if access.authorization is not None:
        headers["Authorization"] = access.authorization
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=access.tls) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error", exc.reason)
        except (json.JSONDecodeError, AttributeError):
            detail = exc.reason
        raise _Refused(detail) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _Refused(f"cannot reach the admin endpoint {url}: {exc}") from None


def _print(body: Any) -> int:
    print(json.dumps(body, indent=1))
    return 0
