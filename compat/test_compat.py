"""The behaviour-parity suite: one test per (scenario, client), both targets inside it.

Each test runs the scenario against Apache Kafka and against kbroker with the same client
stack and fails with the unified diff of the two normalised outcomes when they differ.
"""

from __future__ import annotations

import pytest

from compat.known_differences import KNOWN_DIFFERENCES
from compat.scenarios import Scenario
from compat.session import CompatSession, items

ITEMS = items()


@pytest.mark.parametrize(("scenario", "client"), ITEMS, ids=[f"{s.id}[{c}]" for s, c in ITEMS])
def test_parity(compat_session: CompatSession, scenario: Scenario, client: str) -> None:
    result = compat_session.run_pair(scenario, client)
    if result.status == "error":
        pytest.fail(f"{scenario.id} with {client} raised:\n{result.diff}", pytrace=False)
    known = KNOWN_DIFFERENCES.get((scenario.id, client))
    if known is not None:
        assert result.status == "diff", f"now identical: remove it from compat/known_differences.py ({known})"
        return
    assert result.status == "identical", f"kbroker differs from Kafka ({scenario.doc}):\n{result.diff}"
