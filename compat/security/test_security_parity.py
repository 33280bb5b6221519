"""Security parity: every (scenario, client, way in) on Apache Kafka 4.3.1 and kbroker, secured alike.

One ``SecuredSession`` for the module (both brokers, one set of certificates, SCRAM users);
each test runs one security scenario with one client through one way in on both brokers and
fails with the diff of the normalised outcomes when they differ, unless compat/known_differences.py
explains the difference (then it must still be there, so a fix asks for the entry to go).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat.known_differences import KNOWN_DIFFERENCES
from compat.scenarios.security import SecurityScenario, items
from compat.security.session import SecuredSession

ITEMS = items()


@pytest.fixture(scope="module")
def secured_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredSession]:
    session = SecuredSession(tmp_path_factory.mktemp("compat-security"))
    session.start()
    try:
        yield session
    finally:
        session.close()


@pytest.mark.parametrize(("scenario", "client", "way"), ITEMS, ids=[f"{s.id}[{w}][{c}]" for s, c, w in ITEMS])
def test_security_parity(secured_session: SecuredSession, scenario: SecurityScenario, client: str, way: str) -> None:
    result = secured_session.run_pair(scenario, client, way)
    if result.status == "error":
        pytest.fail(f"{scenario.id} via {way} with {client} raised:\n{result.diff}", pytrace=False)
    known = KNOWN_DIFFERENCES.get((scenario.id, client))
    if known is not None:
        assert result.status == "diff", f"{scenario.id} with {client} is identical now: remove its known difference"
        return
    assert result.status == "identical", f"kbroker differs from Kafka ({scenario.doc}):\n{result.diff}"
