"""The controller's SCRAM credentials (Kafka's ScramControlManager): an AlterUserScramCredentials
request checked against the metadata image, decided as UserScramCredentialRecord /
RemoveUserScramCredentialRecord and committed through ``QuorumController.replay_and_commit``.

A client sends salted passwords (``kafka-configs`` salts them itself); the controller keeps only
what a SCRAM server needs — the salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key") (RFC 5802) — and never the salted password. Kafka's
errors and messages: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM, an empty user name or
iterations outside [4096, 16384] UNACCEPTABLE_CREDENTIAL, a user named twice in one request
DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND. The request
is decided whole: its accepted changes are committed together.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode

from .metadata_records import MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from .quorum_controller import QuorumController

# Kafka's ScramMechanism codes -> the hash each uses; 0 is UNKNOWN.
SCRAM_HASHES = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
TWICE = "A user credential cannot be altered twice in the same request"


def client_key(hash_name: str, salted_password: bytes) -> bytes:
    return hmac.digest(salted_password, b"Client Key", hash_name)


def stored_key(hash_name: str, salted_password: bytes) -> bytes:
    return hashlib.new(hash_name, client_key(hash_name, salted_password)).digest()


def server_key(hash_name: str, salted_password: bytes) -> bytes:
    return hmac.digest(salted_password, b"Server Key", hash_name)


def credential_record(user: str, mechanism: int, salt: bytes, salted_password: bytes,
                      iterations: int) -> UserScramCredentialRecord:
    hash_name = SCRAM_HASHES[mechanism]
    return UserScramCredentialRecord(user, mechanism, salt.hex(), stored_key(hash_name, salted_password).hex(),
                                     server_key(hash_name, salted_password).hex(), iterations)


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # never the salted password
        return f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class AlterResult:
    user: str
    error: ErrorCode
    message: str | None


class ScramControlManager:
    """Decides AlterUserScramCredentials on the active controller (stateless: the image holds
    the credentials)."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    def alter(self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion],
              now_ms: int) -> list[AlterResult]:
        """Each user's result — accepted deletions, accepted upsertions, then refusals, each in
        request order — once the accepted changes are handed to the quorum (NOT_CONTROLLER
        raised when this controller is not active)."""
        errors: dict[str, tuple[ErrorCode, str]] = {}
        to_delete: dict[str, ScramDeletion] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        for deletion in deletions:
            if deletion.name in errors:
                continue
            if to_delete.pop(deletion.name, None) is not None:
                errors[deletion.name] = (ErrorCode.duplicate_resource, TWICE)
            elif (error := self._check_deletion(deletion)) is not None:
                errors[deletion.name] = error
            else:
                to_delete[deletion.name] = deletion
        for upsertion in upsertions:
            if upsertion.name in errors:
                continue
            if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
                errors[upsertion.name] = (ErrorCode.duplicate_resource, TWICE)
            elif (error := _check_upsertion(upsertion)) is not None:
                errors[upsertion.name] = error
            else:
                to_upsert[upsertion.name] = upsertion
        records: list[MetadataRecord] = [RemoveUserScramCredentialRecord(d.name, d.mechanism)
                                         for d in to_delete.values()]
        records += [credential_record(u.name, u.mechanism, u.salt, u.salted_password, u.iterations)
                    for u in to_upsert.values()]
        self.controller.replay_and_commit(records, now_ms)
        return ([AlterResult(user, ErrorCode.none, None) for user in [*to_delete, *to_upsert]]
                + [AlterResult(user, code, message) for user, (code, message) in errors.items()])

    def _check_deletion(self, deletion: ScramDeletion) -> tuple[ErrorCode, str] | None:
        error = _check_name_and_mechanism(deletion.name, deletion.mechanism)
        if error is None and (deletion.name, deletion.mechanism) not in self.controller.image.scram_credentials:
            error = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        return error


def _check_upsertion(upsertion: ScramUpsertion) -> tuple[ErrorCode, str] | None:
    error = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if error is None and upsertion.iterations < MIN_ITERATIONS:
        error = (ErrorCode.unacceptable_credential, "Too few iterations")
    elif error is None and upsertion.iterations > MAX_ITERATIONS:
        error = (ErrorCode.unacceptable_credential, "Too many iterations")
    return error


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in SCRAM_HASHES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None
