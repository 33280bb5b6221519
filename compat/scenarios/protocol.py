"""Protocol surface seen through clients: the ApiVersions table (kbroker's must be a subset
of Kafka's with identical ranges, see normalise rule 5)."""

from __future__ import annotations

from typing import Any

from compat.scenarios import Run, scenario


@scenario("protocol/api-versions", needs={"api_versions"})
def api_versions(run: Run) -> Any:
    """The APIs and version ranges the broker advertises, as the client saw them."""
    return {"api_versions": run.client.api_versions()}
