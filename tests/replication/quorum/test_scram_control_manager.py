"""ScramControlManager: AlterUserScramCredentials decided with Kafka's errors, committed to the
metadata log as salted keys (never the salted password)."""

from __future__ import annotations

import pytest
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.quorum_controller import QuorumController
from kbroker.replication.quorum.scram_control_manager import (
    AlterResult,
    ScramControlManager,
    ScramDeletion,
    ScramUpsertion,
)

from tests.replication.test_quorum_controller import make_controller, replayed

SHA256, SHA512 = 1, 2
SALTED = bytes(range(32))


def upsert(name: str, mechanism: int = SHA256, iterations: int = 8192) -> ScramUpsertion:
    return ScramUpsertion(name, mechanism, iterations, b"salt", SALTED)


@pytest.fixture
def controller(tmp_path) -> QuorumController:
    return make_controller(tmp_path)


def test_upsertions_are_stored_as_keys_and_deletions_remove_them(controller: QuorumController) -> None:
    manager = ScramControlManager(controller)
    assert manager.alter([], [upsert("alice"), upsert("bob", SHA512, 4096)], 0) == [
        AlterResult("alice", ErrorCode.none, None), AlterResult("bob", ErrorCode.none, None)]
    image = replayed(controller)
    alice = image.scram_credentials[("alice", SHA256)]
    assert (alice.salt, alice.iterations) == (b"salt".hex(), 8192)
    assert SALTED.hex() not in (alice.stored_key, alice.server_key)
    assert manager.alter([ScramDeletion("alice", SHA256)], [], 0) == [AlterResult("alice", ErrorCode.none, None)]
    assert set(replayed(controller).scram_credentials) == {("bob", SHA512)}


def test_kafkas_refusals(controller: QuorumController) -> None:
    manager = ScramControlManager(controller)
    results = manager.alter(
        [ScramDeletion("ghost", SHA256), ScramDeletion("twice", SHA256)],
        [upsert("twice"), upsert("", SHA256), upsert("weird", 7), upsert("few", iterations=4095),
         upsert("many", iterations=16385), upsert("ok", iterations=16384)], 0)
    assert {r.user: (r.error, r.message) for r in results} == {
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "twice": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "weird": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "ok": (ErrorCode.none, None),
    }
    assert set(replayed(controller).scram_credentials) == {("ok", SHA256)}


def test_a_user_twice_in_one_request_is_a_duplicate(controller: QuorumController) -> None:
    manager = ScramControlManager(controller)
    manager.alter([], [upsert("alice")], 0)
    results = manager.alter([ScramDeletion("alice", SHA256)], [upsert("alice", SHA512), upsert("bob"),
                                                                upsert("bob", SHA512)], 0)
    assert [(r.user, r.error) for r in results] == [("alice", ErrorCode.duplicate_resource),
                                                   ("bob", ErrorCode.duplicate_resource)]
    assert results[0].message == "A user credential cannot be altered twice in the same request"
    assert set(replayed(controller).scram_credentials) == {("alice", SHA256)}
