"""What a client concludes about the broker from its ApiVersions answer: franz-go's release
guess (kversion, as ``kcl misc probe-version`` prints it) and whether kadm's ACL and quota
describes run at all (kadm refuses them as "broker is too old" when the APIs are not
advertised)."""

from __future__ import annotations

from typing import Any

from compat.scenarios import Run, scenario


@scenario("versions/guess", needs={"api_versions.guess"})
def guess(run: Run) -> Any:
    """The Kafka release the client infers from the advertised API version ranges."""
    return {"guess": run.client.version_guess()}  # type: ignore[attr-defined]


@scenario("versions/acls-quotas-describe", needs={"admin.acls_quotas"})
def acls_quotas_describe(run: Run) -> Any:
    """Describing every ACL and every client quota with no authorizer and no quotas set: Kafka
    4.3.1 answers the ACL filter SECURITY_DISABLED and the quotas an empty list."""
    c: Any = run.client
    return {"acls": c.describe_acls(), "quotas": c.describe_client_quotas()}
