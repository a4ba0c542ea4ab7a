"""SCRAM credentials managed by AlterUserScramCredentials / DescribeUserScramCredentials
and `brook configs --entity-type users`: Kafka's checks and errors, what is stored (never
the password), and a user created this way logging in."""

from __future__ import annotations

import json
import os

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32

from brook.broker.client import BlockingClient
from brook.broker.security.scram import ScramClient, salted_password
from brook.broker.security.scram_credentials import SCRAM_CREDENTIALS_FILE
from brook.protocol.errors import ErrorCode
from tests.integration.cli import brook

from .conftest import SecureBroker

SHA256, SHA512 = i8(1), i8(2)


@pytest.fixture
def broker(tmp_path, pki):
    secure = SecureBroker(tmp_path / "data", pki).start()
    try:
        yield secure
    finally:
        secure.stop()


def _admin(broker: SecureBroker) -> BlockingClient:
    return BlockingClient("127.0.0.1", broker.ports["PLAINTEXT"], "scram-admin")


def _upsert(name: str, mechanism: i8 = SHA256, iterations: int = 4096, password: str = "pw"):
    salt = os.urandom(16)
    hashed = salted_password(
        "SCRAM-SHA-256" if mechanism == SHA256 else "SCRAM-SHA-512", password, salt, iterations
    )
    return ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=i32(iterations),
        salt=salt,
        salted_password=hashed,
    )


def _alter(broker: SecureBroker, upsertions=(), deletions=()) -> dict[str, tuple]:
    with _admin(broker) as client:
        response = client.request(
            AlterUserScramCredentialsRequest(
                deletions=tuple(deletions), upsertions=tuple(upsertions)
            )
        )
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def _describe(broker: SecureBroker, *names: str):
    with _admin(broker) as client:
        response = client.request(
            DescribeUserScramCredentialsRequest(
                users=tuple(UserName(name=n) for n in names) if names else None
            )
        )
    assert response.error_code == ErrorCode.none
    return {
        r.user: (
            r.error_code,
            r.error_message,
            [(c.mechanism, c.iterations) for c in r.credential_infos],
        )
        for r in response.results
    }


def _login(broker: SecureBroker, mechanism: str, user: str, password: str) -> ErrorCode:
    with BlockingClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"], "scram-login") as client:
        assert client.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
        scram = ScramClient(mechanism, user, password)
        first = client.request(SaslAuthenticateRequest(auth_bytes=scram.first_message()))
        final = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.final_message(first.auth_bytes))
        )
        return final.error_code


def test_kafka_checks_each_user_and_refused_users_change_nothing(broker):
    results = _alter(
        broker,
        upsertions=[
            _upsert("few", iterations=4095),
            _upsert("many", iterations=16385),
            _upsert(""),
            ScramCredentialUpsertion(
                name="weird", mechanism=i8(9), iterations=i32(4096), salt=b"s", salted_password=b"p"
            ),
            _upsert("twice"),
            _upsert("twice"),
            # Two mechanisms of one user: both written, as Kafka's ZooKeeper mode does.
            _upsert("both"),
            _upsert("both", SHA512),
            _upsert("dave", iterations=8192, password="dave-secret"),
        ],
        deletions=[ScramCredentialDeletion(name="ghost", mechanism=SHA256)],
    )
    assert results == {
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "weird": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "twice": (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        "ghost": (
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        "dave": (ErrorCode.none, None),
        "both": (ErrorCode.none, None),
    }
    described = _describe(broker)
    # Only the fixture's users and dave: nothing of a refused user was written.
    assert sorted(described) == ["bob", "both", "carol", "dave"]
    assert described["both"][2] == [(1, 4096), (2, 4096)]
    assert described["dave"] == (ErrorCode.none, None, [(1, 8192)])
    assert _login(broker, "SCRAM-SHA-256", "dave", "dave-secret") == ErrorCode.none


def test_describe_names_missing_and_repeated_users(broker):
    described = _describe(broker, "bob", "nobody", "carol", "carol")
    assert described["bob"] == (ErrorCode.none, None, [(1, 8192)])
    assert described["nobody"] == (
        ErrorCode.resource_not_found,
        "Attempt to describe a user credential that does not exist: nobody",
        [],
    )
    assert described["carol"] == (
        ErrorCode.duplicate_resource,
        "Cannot describe SCRAM credentials for the same user twice in a single request: carol",
        [],
    )


def test_credentials_are_stored_as_kafka_stores_them_and_survive_a_restart(tmp_path, pki):
    data = tmp_path / "data"
    first = SecureBroker(data, pki).start()
    first.stop()
    stored = json.loads((data / SCRAM_CREDENTIALS_FILE).read_text())
    bob = stored["users"]["bob"]["SCRAM-SHA-256"]
    assert [field.split("=", 1)[0] for field in bob.split(",")] == [
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    ]
    assert "bob-secret" not in (data / SCRAM_CREDENTIALS_FILE).read_text()
    # Started again on the same data, without the fixture creating anyone: bob logs in.
    again = SecureBroker(data, pki)
    again.thread.start()
    try:
        assert _login(again, "SCRAM-SHA-256", "bob", "bob-secret") == ErrorCode.none
        # A deleted credential no longer logs in.
        gone = _alter(again, deletions=[ScramCredentialDeletion(name="bob", mechanism=SHA256)])
        assert gone == {"bob": (ErrorCode.none, None)}
        assert _login(again, "SCRAM-SHA-256", "bob", "bob-secret") == (
            ErrorCode.sasl_authentication_failed
        )
    finally:
        again.thread.stop()


def test_brook_configs_manages_user_credentials(broker):
    bootstrap = broker.bootstrap("PLAINTEXT")
    added = brook(
        "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "erin", "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=erin-secret],SCRAM-SHA-512=[password=erin-512]",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.lines == ["Completed updating config for user erin."]
    assert _login(broker, "SCRAM-SHA-256", "erin", "erin-secret") == ErrorCode.none
    assert _login(broker, "SCRAM-SHA-512", "erin", "erin-512") == ErrorCode.none
    described = brook(
        "configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users",
        "--entity-name", "erin",
    )  # fmt: skip
    assert described.lines == [
        "SCRAM credential configs for user-principal 'erin' are"
        " SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    ]
    deleted = brook(
        "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    assert _describe(broker, "erin")["erin"][2] == [(1, 8192)]
    # Kafka's error for what cannot be deleted, in one line.
    again = brook(
        "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert again.returncode != 0
    assert "Attempt to delete a user credential that does not exist" in again.stderr
    too_few = brook(
        "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "erin", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]",
    )  # fmt: skip
    assert too_few.returncode != 0 and "Too few iterations" in too_few.stderr
