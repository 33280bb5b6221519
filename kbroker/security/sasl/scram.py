"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the server against the credentials
in the metadata image, and the broker's own client.

Messages (Kafka supports no channel binding: the GS2 header is ``n,,`` or ``n,a=<authzid>,``)::

    client-first  n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 GS2 header>,r=<nonce>,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>

Every failure but one is Kafka's generic "invalid credentials" message, an unknown user included;
only an authorization id other than the user name has its own message. Deviation, so that the
exchange does not tell which users exist: Kafka stops an unknown user's exchange at the first
message, kbroker answers it with a decoy challenge (a salt stable for that name, 4096
iterations) and fails it at the final message, where a wrong password fails. The delegation-token extension
(``tokenauth=true``) fails the same way: kbroker has no delegation tokens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from kbroker.replication.quorum.metadata_records import UserScramCredentialRecord
from kbroker.replication.quorum.scram_control_manager import MIN_ITERATIONS, client_key, server_key, stored_key
from kbroker.security.sasl.jaas import JaasLoginModule
from kbroker.security.sasl.mechanism import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    invalid_credentials,
)

HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
CredentialLookup = Callable[[str, str], UserScramCredentialRecord | None]  # (user, mechanism)

# RFC 5802's grammar, restricted to ASCII as Kafka's parser is.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[\x01-\x2b\x2d-\x3c\x3e-\x7f]+)|v=(?P<signature>{_BASE64})){_EXTENSIONS}")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _sasl_name(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


def _user(sasl_name: str) -> str:
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def _nonce() -> str:
    # base64url without padding: printable, and never the ',' the messages are split on
    return secrets.token_urlsafe(24)


def _extensions(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


# Per process: an unknown user's decoy salt is the same at every attempt, as a real one would be.
_DECOY_SECRET = secrets.token_bytes(32)
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _decoy(user: str, mechanism: str) -> UserScramCredentialRecord:
    """A credential no password matches (random keys), with a salt shaped like Kafka's (26
    base-36 characters)."""
    digest = int.from_bytes(hmac.digest(_DECOY_SECRET, f"{mechanism}\0{user}".encode(), "sha256"), "big")
    salt = "".join(_BASE36[(digest >> (6 * i)) % 36] for i in range(26)).encode()
    size = hashlib.new(HASHES[mechanism]).digest_size
    return UserScramCredentialRecord(user, 0, salt.hex(), secrets.token_bytes(size).hex(),
                                     secrets.token_bytes(size).hex(), MIN_ITERATIONS)


class ScramServer:
    """One SCRAM exchange on the server: client-first, then client-final, then complete."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._new_nonce = nonce
        self._state = "first"
        self._user = ""
        self._credential: UserScramCredentialRecord | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._state == "first":
                challenge = self._client_first(response)
                self._state = "final"
                return challenge
            if self._state == "final":
                challenge = self._client_final(response)
                self._state = "complete"
                return challenge
        except SaslAuthenticationError:
            self._state = "failed"
            self._credential = None
            raise
        self._state = "failed"
        raise invalid_credentials(self.mechanism)  # a token after the exchange ended

    def _client_first(self, response: bytes) -> bytes:
        match = _CLIENT_FIRST.fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise invalid_credentials(self.mechanism)
        if _extensions(match["extensions"]).get("tokenauth", "").lower() == "true":
            raise invalid_credentials(self.mechanism)
        user = _user(match["saslname"])
        credential = self._lookup(user, self.mechanism) or _decoy(user, self.mechanism)
        if match["authzid"] and _user(match["authzid"]) != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise invalid_credentials(self.mechanism)
        self._user = user
        self._credential = credential
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + self._new_nonce()
        salt = bytes.fromhex(credential.salt)
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, response: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(response.decode("utf-8", "replace"))
        if match is None or match["nonce"] != self._nonce:
            raise invalid_credentials(self.mechanism)
        try:
            channel, proof = _unb64(match["channel"]), _unb64(match["proof"])
        except binascii.Error:
            raise invalid_credentials(self.mechanism) from None
        if channel != self._gs2_header.encode():
            raise invalid_credentials(self.mechanism)  # RFC 5802: c= must repeat the GS2 header
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        expected_stored_key = bytes.fromhex(credential.stored_key)
        client_signature = hmac.digest(expected_stored_key, auth_message, self._hash)
        if len(proof) != len(client_signature):
            raise invalid_credentials(self.mechanism)
        computed = hashlib.new(self._hash, _xor(proof, client_signature)).digest()
        if not hmac.compare_digest(computed, expected_stored_key):
            raise invalid_credentials(self.mechanism)
        server_signature = hmac.digest(bytes.fromhex(credential.server_key), auth_message, self._hash)
        self._credential = None
        return f"v={_b64(server_signature)}".encode()

    @property
    def is_complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if not self.is_complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._user

    @property
    def session_lifetime_ms(self) -> int | None:
        return None  # a stored credential does not expire (kbroker has no delegation tokens)


class ScramClient:
    """The broker's own SCRAM login (the inter-broker listener's ScramLoginModule
    ``username`` / ``password``); it checks the server's signature before it trusts the server."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._username = username
        self._password = password
        self._client_nonce = nonce()
        self._client_first_bare = f"n={_sasl_name(username)},r={self._client_nonce}"
        self._server_signature = b""
        self._state = "first"

    @classmethod
    def from_jaas(cls, mechanism: str, module: JaasLoginModule) -> ScramClient:
        return cls(mechanism, module.options.get("username", ""), module.options.get("password", ""))

    def initial_response(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._state == "first":
            self._state = "final"
            return self._server_first(challenge.decode("utf-8", "replace"))
        match = _SERVER_FINAL.fullmatch(challenge.decode("utf-8", "replace"))
        if match is None:
            raise SaslAuthenticationError("Invalid SCRAM server final message format")
        if match["error"] is not None:
            raise SaslAuthenticationError(f"Sasl authentication using {self.mechanism} failed with error: "
                                          f"{match['error']}")
        if not hmac.compare_digest(_unb64(match["signature"]), self._server_signature):
            raise SaslAuthenticationError("Invalid server signature in server final message")
        self._state = "complete"
        return None

    def _server_first(self, message: str) -> bytes:
        match = _SERVER_FIRST.fullmatch(message)
        if match is None:
            raise SaslAuthenticationError("Invalid SCRAM server first message format")
        nonce, iterations = match["nonce"], int(match["iterations"])
        if not nonce.startswith(self._client_nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise SaslAuthenticationError(f"Requested iterations {iterations} is less than the minimum "
                                          f"{MIN_ITERATIONS} for {self.mechanism}")
        salted = salted_password(self.mechanism, self._password, _unb64(match["salt"]), iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{message},{without_proof}".encode()
        client_signature = hmac.digest(stored_key(self._hash, salted), auth_message, self._hash)
        proof = _xor(client_key(self._hash, salted), client_signature)
        self._server_signature = hmac.digest(server_key(self._hash, salted), auth_message, self._hash)
        return f"{without_proof},p={_b64(proof)}".encode()

    @property
    def is_complete(self) -> bool:
        return self._state == "complete"
