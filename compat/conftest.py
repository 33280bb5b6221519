"""Session fixture for the compat suite: Apache Kafka and kbroker, each started once.

``COMPAT_RESULTS=path`` makes the session write every (scenario, client) result there as
JSON when it ends (``python -m compat report`` uses it to write REPORT.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.session import CompatSession


@pytest.fixture(scope="session")
def compat_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompatSession]:
    session = CompatSession(tmp_path_factory.mktemp("compat"))
    session.start()
    try:
        yield session
    finally:
        session.close()
        results = os.environ.get("COMPAT_RESULTS")
        if results:
            session.write_results(Path(results))
