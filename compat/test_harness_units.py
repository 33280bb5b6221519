"""Fast checks of the compat harness itself (no brokers): the scenario registry, the feature
names scenarios ask for, and every normalisation rule (what it rewrites and what it keeps)."""

from __future__ import annotations

from compat.clients import CLIENTS
from compat.normalise import Context, normalise, normalise_pair
from compat.scenarios import ordered
from compat.session import items

CTX = Context("127.0.0.1:40001", "AbCdEfGhIjKlMnOpQrStUv", (1_800_000_000_000, 1_800_000_005_000))


def test_at_least_sixty_scenarios_each_run_with_some_client() -> None:
    scenarios = ordered()
    run = {s.id for s, _ in items()}
    assert len(scenarios) >= 60
    assert [s.id for s in scenarios if s.id not in run] == []


def test_scenarios_only_ask_for_features_some_client_has() -> None:
    known = set().union(*(cls.FEATURES for cls in CLIENTS.values()))
    for s in ordered():
        assert s.needs <= known, (s.id, s.needs - known)
        assert s.clients is None or set(s.clients) <= set(CLIENTS), s.id
        assert s.doc, f"{s.id} has no docstring"


def test_restart_scenarios_run_last() -> None:
    ids = [s.id for s in ordered()]
    first_restart = min(i for i, sid in enumerate(ids) if sid.startswith("restart/"))
    assert all(sid.startswith("restart/") for sid in ids[first_restart:])


def test_address_cluster_id_and_topic_ids_are_replaced_exactly() -> None:
    outcome = {
        "nodes": [[1, "127.0.0.1:40001"]], "other": "127.0.0.1:40002",
        "cluster_id": "AbCdEfGhIjKlMnOpQrStUv", "line": "Cluster ID: AbCdEfGhIjKlMnOpQrStUv",
        "topic_id": "0f0e8d5c-6a3b-4c2d-9e1f-0a1b2c3d4e5f", "zero": {"topic_id": "AAAAAAAAAAAAAAAAAAAAAA"},
        "cli": "Topic: t\tTopicId: V68fSWKwS5u4w1v2O9zF8A\tPartitionCount: 1",
    }  # fmt: skip
    assert normalise(outcome, CTX) == {
        "nodes": [[1, "<bootstrap>"]], "other": "127.0.0.1:40002",
        "cluster_id": "<cluster-id>", "line": "Cluster ID: <cluster-id>",
        "topic_id": "<topic-id>", "zero": {"topic_id": "AAAAAAAAAAAAAAAAAAAAAA"},
        "cli": "Topic: t\tTopicId: <topic-id>\tPartitionCount: 1",
    }  # fmt: skip


def test_only_timestamps_inside_the_run_window_become_now() -> None:
    inside, before, scenario_ts = 1_800_000_001_000, 1_799_999_990_000, 1_799_990_000_000
    outcome = {"records": [{"timestamp": inside, "offset": inside}, {"timestamp": before}, {"timestamp": scenario_ts}],
               "lines": [f"CreateTime:{inside}\tOffset:0", f"LogAppendTime:{scenario_ts}"]}  # fmt: skip
    assert normalise(outcome, CTX) == {
        "records": [{"timestamp": "<now>", "offset": inside}, {"timestamp": before}, {"timestamp": scenario_ts}],
        "lines": ["CreateTime:<now>\tOffset:0", f"LogAppendTime:{scenario_ts}"],
    }  # fmt: skip


def test_api_versions_kbroker_may_omit_apis_but_not_change_or_add_them() -> None:
    kafka = {"api_versions": {"0": [0, 13], "1": [4, 18], "11": [0, 9]}}
    assert normalise_pair(kafka, {"api_versions": {"0": [0, 13], "1": [4, 18]}}) == (
        {"api_versions": {"0": [0, 13], "1": [4, 18]}}, {"api_versions": {"0": [0, 13], "1": [4, 18]}})
    narrowed = normalise_pair(kafka, {"api_versions": {"0": [3, 13]}})
    assert narrowed[0] != narrowed[1]
    extra = normalise_pair(kafka, {"api_versions": {"0": [0, 13], "99": [0, 0]}})
    assert extra[0] != extra[1]
