"""SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka use them): the
credential Kafka stores, and the server side of the exchange, with hashlib and hmac.

Kafka stores per user and mechanism the salt, the iteration count, StoredKey = H(ClientKey)
and ServerKey -- never the password nor the salted password -- and so does Brook
(scram_credentials.py). AlterUserScramCredentials brings the salted password, from which
the two keys are derived here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

# Kafka's mechanisms: name -> (AlterUserScramCredentials' type byte, hash).
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MECHANISM_BY_TYPE = {number: name for name, (number, _) in SCRAM_MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # Kafka's limit on AlterUserScramCredentials


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka_string(self) -> str:
        """As Kafka writes it in /config/users/<user> (ScramCredentialUtils)."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(
            base64.b64decode(fields["salt"]),
            base64.b64decode(fields["stored_key"]),
            base64.b64decode(fields["server_key"]),
            int(fields["iterations"]),
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, hash_name)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def credential_from_salted_password(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    hash_name = SCRAM_MECHANISMS[mechanism][1]
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
        iterations=iterations,
    )


def new_credential(mechanism: str, password: str, iterations: int) -> ScramCredential:
    salt = os.urandom(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


# --- the server side of the exchange ---------------------------------------------------------


class ScramFailure(Exception):
    """The exchange failed. Kafka answers these (its SaslException) with one message for
    every cause, so that a client learns nothing of whether the user exists."""


class ScramRefusal(Exception):
    """Kafka's SaslAuthenticationException: the message goes to the client as it is."""


_CLIENT_FIRST = re.compile(
    r"^(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)(?P<bare>n=(?P<user>[^,]*),r=(?P<nonce>[^,]+)(?P<ext>(?:,[^,]*)*))$"
)
_CLIENT_FINAL = re.compile(
    r"^(?P<without_proof>c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[^,]*)*?),p=(?P<proof>[^,]+)$"
)

CredentialLookup = Callable[[str, str], Awaitable["ScramCredential | None"]]


def _saslname(text: str) -> str:
    """RFC 5802's user name escapes: =2C is a comma, =3D an equals sign."""
    if re.search(r"=(?!2C|3D)", text):
        raise ScramFailure("Invalid username")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, decoy_key: bytes) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism][1]
        self._lookup = lookup
        # The key from which an unknown user's made-up salt is derived: the same user
        # gets the same salt each time, as a real one would.
        self._decoy_key = decoy_key
        self.complete = False
        self.username = ""
        self._step = 0
        self._credential: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    async def evaluate(self, token: bytes) -> bytes:
        if self._step == 0:
            return await self._client_first(token)
        if self._step == 1:
            return self._client_final(token)
        raise ScramFailure("Unexpected token after the SCRAM exchange completed")

    async def _client_first(self, token: bytes) -> bytes:
        match = _CLIENT_FIRST.match(token.decode("utf-8", "replace"))
        if match is None:
            raise ScramFailure("Invalid SCRAM client first message")
        username = _saslname(match["user"])
        if not username:
            raise ScramFailure("Invalid SCRAM client first message: no username")
        authzid = match["authzid"]
        if authzid and _saslname(authzid) != username:
            raise ScramRefusal(
                "Authentication failed: Client requested an authorization id that is"
                " different from username"
            )
        extensions = dict(item.split("=", 1) for item in match["ext"].split(",") if "=" in item)
        if extensions.get("tokenauth", "").lower() == "true":
            # Delegation tokens are not served: no token can match.
            raise ScramFailure("Delegation token authentication is not supported")
        self.username = username
        self._gs2 = match["gs2"]
        self._client_first_bare = match["bare"]
        credential = await self._lookup(username, self.mechanism)
        self._credential = credential
        if credential is None:
            # An unknown user gets a server-first message like any other and fails at
            # the proof, as a wrong password does (RFC 5802 section 9).
            salt = _hmac("sha256", self._decoy_key, username.encode())
            credential = ScramCredential(salt, b"", b"", MIN_ITERATIONS)
        self._nonce = match["nonce"] + base64.urlsafe_b64encode(os.urandom(24)).decode()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        match = _CLIENT_FINAL.match(token.decode("utf-8", "replace"))
        if match is None:
            raise ScramFailure("Invalid SCRAM client final message")
        # Kafka checks that the nonce ends with the server's (not that it equals it), and
        # older librdkafka (kcat's 2.0) sends its own nonce before the server's whole one:
        # accepted as Kafka accepts it. The proof covers the message as sent either way.
        if not match["nonce"].endswith(self._nonce):
            raise ScramFailure("Invalid client nonce in the final client message.")
        try:
            binding = base64.b64decode(match["binding"], validate=True).decode()
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise ScramFailure("Invalid SCRAM client final message") from None
        if binding != self._gs2:
            raise ScramFailure("Invalid channel binding in the final client message.")
        credential = self._credential
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode()
        if credential is None:
            raise ScramFailure("Invalid client credentials")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise ScramFailure("Invalid client credentials")
        self.complete = True
        self._step = 2
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode()


# --- the client side, for the inter-broker client and the tools --------------------------


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism][1]
        self._username = username
        self._password = password
        self._nonce = base64.urlsafe_b64encode(os.urandom(24)).decode()
        self._client_first_bare = (
            "n=" + username.replace("=", "=3D").replace(",", "=2C") + f",r={self._nonce}"
        )
        self._expected_server_signature = b""

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        if not fields.get("r", "").startswith(self._nonce):
            raise ValueError("the server's nonce does not extend the client's")
        salt = base64.b64decode(fields["s"])
        salted = salted_password(self.mechanism, self._password, salt, int(fields["i"]))
        without_proof = f"c={_b64(b'n,,')},r={fields['r']}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._expected_server_signature = _hmac(self._hash, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode()
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._expected_server_signature
        ):
            raise ValueError(f"the server's signature does not verify: {text!r}")
