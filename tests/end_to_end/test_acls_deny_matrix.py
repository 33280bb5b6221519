"""The deny matrix against real Apache Kafka 4.3.1 and kbroker side by side (issue #18).

compat/scenarios/acls.py runs every case (compat/scenarios/acl_cases.py) on each broker — the
API without the ACLs it needs, then with them — and checks nothing changed after the denied
runs. Here: the outcomes must be the same on both brokers, every case must succeed once its
ACLs are in force, and the table is written to compat/ACL_MATRIX.md (and printed) for the
closing note.
"""

from __future__ import annotations

from pathlib import Path

from compat.scenarios import acl_cases, acls
from compat.targets import KafkaTarget, KbrokerTarget

MATRIX = Path(__file__).resolve().parents[2] / "compat" / "ACL_MATRIX.md"


def test_every_api_denied_and_allowed_as_kafka_does(tmp_path: Path) -> None:
    cases = acl_cases.confluent_cases() + acl_cases.java_cases() + acl_cases.python_cases()
    outcomes: dict[str, dict[str, tuple[str, str]]] = {}
    states: dict[str, dict] = {}
    for target_class in (KafkaTarget, KbrokerTarget):
        workdir = tmp_path / target_class.name
        with target_class(workdir, extra=acls.AUTHORIZER_SETTINGS) as target:
            outcomes[target.name], states[target.name] = acls.run_on(target, workdir, cases)
    table = acls.rows(cases, outcomes["kafka"], outcomes["kbroker"])
    unchanged = {name: state["before"] == state["after"] for name, state in states.items()}
    text = acls.markdown(table, unchanged)
    MATRIX.write_text(text)
    print(text)
    assert unchanged == {"kafka": True, "kbroker": True}, states
    differing = [r for r in table if r.denied["kafka"] != r.denied["kbroker"]
                 or r.allowed["kafka"] != r.allowed["kbroker"]]
    assert not differing, differing
    assert all(r.allowed["kbroker"].startswith("ok") for r in table), table
