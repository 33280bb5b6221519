"""Client quotas: Kafka's precedence (KIP-55), its window math, and the controller's checks."""

from __future__ import annotations

import pytest
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.client_quota_control_manager import (
    QuotaAlteration,
    alter_client_quotas,
    quota_entity,
)

from kbroker.quotas.client_quota_manager import ClientQuotaManager
from kbroker.quotas.quota_precedence import applicable_quota
from kbroker.quotas.sampled_rate import SampledRate

KEY = "producer_byte_rate"
LEVELS = [  # highest precedence first, with the sensor key Kafka's metric tags give
    ({"user": "alice", "client-id": "app"}, ("alice", "app")),
    ({"user": "alice", "client-id": None}, ("alice", "app")),
    ({"user": "alice"}, ("alice", "")),
    ({"user": None, "client-id": "app"}, ("alice", "app")),
    ({"user": None, "client-id": None}, ("alice", "app")),
    ({"user": None}, ("alice", "")),
    ({"client-id": "app"}, ("", "app")),
    ({"client-id": None}, ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_highest_configured_level_applies(level: int) -> None:
    configs = {quota_entity(entity): {KEY: float(1000 + i)} for i, (entity, _s) in enumerate(LEVELS) if i >= level}
    assert applicable_quota(configs, KEY, "alice", "app") == (1000.0 + level, LEVELS[level][1])


def test_precedence_is_per_key_and_other_names_do_not_match() -> None:
    configs = {
        quota_entity({"user": "alice", "client-id": "app"}): {"consumer_byte_rate": 5.0},
        quota_entity({"user": "bob"}): {KEY: 7.0},
        quota_entity({"client-id": "app"}): {KEY: 9.0},
    }
    assert applicable_quota(configs, KEY, "alice", "app") == (9.0, ("", "app"))
    assert applicable_quota(configs, KEY, "alice", "other") is None
    assert applicable_quota({}, KEY, "alice", "app") is None


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(10 * 1024 * 1024, 0)
    assert rate.window_size_ms(0) == 10_000  # a first burst is spread over 10 windows
    assert rate.rate(0) == pytest.approx(1024 * 1024)


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    # Kafka's QuotaUtils.throttleTime: X = (O - T) / T * W
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(20_000, 0)  # observed 2000/s over a 10 s window
    assert rate.throttle_ms(1000.0, 0) == 10_000
    assert rate.throttle_ms(4000.0, 0) == 0


def test_old_samples_expire() -> None:
    rate = SampledRate(samples=3, window_ms=1000, now_ms=0)
    rate.record(3000, 0)
    rate.record(1000, 1500)
    # 1.5 s elapsed, one full window: counted as 2.5 s so that (samples - 1) windows are full
    assert rate.rate(1500) == pytest.approx(4000 / 2.5)
    # at 3 s the first sample is past all windows: only the second (1.5 s ago) counts
    assert rate.rate(3000) == pytest.approx(1000 / 2.5)


def test_manager_throttles_over_quota_only_and_shares_a_user_level_sensor() -> None:
    configs = {quota_entity({"user": "alice"}): {KEY: 1000.0}}
    manager = ClientQuotaManager(KEY, samples=11, window_ms=1000)
    assert manager.record(configs, "alice", "a", 5000, 0) == 0  # 500/s over 10 s
    assert manager.record(configs, "alice", "b", 10_000, 0) == 5000  # the same sensor: 1500/s
    assert manager.record(configs, "bob", "a", 10**9, 0) == 0  # no quota for bob
    assert manager.max_value_in_window(configs, "alice", "a") == 10_000
    request = ClientQuotaManager("request_percentage", samples=11, window_ms=1000, max_throttle_ms=1000)
    assert request.record({quota_entity({"user": "alice"}): {"request_percentage": 1.0}}, "alice", "a", 50.0, 0) == 1000


def _alter(current, entity, *ops):
    return alter_client_quotas(current, [QuotaAlteration(tuple(entity.items()), list(ops))])


def test_alterations_become_records_and_unchanged_values_none() -> None:
    entity = {"user": "alice", "client-id": None}
    results, records = _alter({}, entity, (KEY, 1048576.0), ("request_percentage", 12.5))
    assert results == [(quota_entity(entity), None)]
    assert [(r.entity, r.key, r.value, r.remove) for r in records] == [
        ((("client-id", None), ("user", "alice")), KEY, 1048576.0, False),
        ((("client-id", None), ("user", "alice")), "request_percentage", 12.5, False),
    ]
    current = {quota_entity(entity): {KEY: 1048576.0}}
    assert _alter(current, entity, (KEY, 1048576.0))[1] == []
    assert [(r.key, r.remove) for r in _alter(current, entity, (KEY, None), ("consumer_byte_rate", None))[1]] == [
        (KEY, True)]


@pytest.mark.parametrize(("entity", "op", "message"), [
    ({"user": "alice"}, ("foo", 1.0), "Invalid configuration key foo"),
    ({"user": "alice"}, (KEY, -1.0), f"Quota {KEY} must be greater than 0"),
    ({"user": "alice"}, (KEY, 0.0), f"Quota {KEY} must be greater than 0"),
    ({"user": "alice"}, (KEY, 1.5), f"{KEY} cannot be a fractional value."),
    ({"user": "alice"}, ("connection_creation_rate", 5.0), "Invalid configuration key connection_creation_rate"),
    ({"ip": "10.0.0.1"}, (KEY, 5.0), f"Invalid configuration key {KEY}"),
    ({"ip": "10.0.0.1", "user": "a"}, ("connection_creation_rate", 5.0),
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"user": ""}, (KEY, 5.0), "Empty user not supported"),
    ({"group": "g"}, (KEY, 5.0), "Unhandled client quota entity type: group"),
    ({}, (KEY, 5.0), "Invalid empty client quota entity"),
])
def test_invalid_alterations_are_refused_with_kafkas_message(entity, op, message) -> None:
    results, records = _alter({}, entity, op)
    (_entity, error), = results
    assert (error.code, error.message) == (ErrorCode.invalid_request, message)
    assert records == []


class _Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def test_strict_mutation_quota_refuses_only_once_the_bucket_is_empty() -> None:
    from kbroker.protocol.errors import KafkaError

    from kbroker.quotas.client_quotas import MutationQuota
    from kbroker.quotas.sampled_rate import TokenBucket

    clock, bucket = _Clock(), TokenBucket(0)
    quota = MutationQuota((2.0, 2.0 * 11, bucket), strict=True, now_ms=clock)  # burst: 22 partitions
    quota.check()
    quota.record(30)  # accepted although it takes the bucket to -8
    assert quota.throttle_time().total_seconds() == 0  # strict: no throttle until a refusal
    with pytest.raises(KafkaError) as refused:
        quota.check()
    assert (refused.value.code, refused.value.message) == (ErrorCode.throttling_quota_exceeded, None)
    assert quota.throttle_time().total_seconds() == 4.0  # 8 tokens at 2 per second
    clock.ms = 4000
    quota.check()  # refilled to zero: allowed again


def test_permissive_mutation_quota_serves_and_tells_the_client_to_wait() -> None:
    from kbroker.quotas.client_quotas import MutationQuota
    from kbroker.quotas.sampled_rate import TokenBucket

    quota = MutationQuota((1.0, 11.0, TokenBucket(0)), strict=False, now_ms=_Clock())
    quota.check()
    quota.record(15)
    quota.check()  # never refuses
    assert quota.throttle_time().total_seconds() == 4.0


def test_request_time_counts_the_handlers_steps_not_its_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """request_percentage's kbroker analogue: the time a handler runs on the event loop, between
    its awaits (a fake clock: each step advances it; the wait in between advances it more)."""
    import asyncio

    from kbroker.quotas import client_quotas

    now = [0.0]
    monkeypatch.setattr(client_quotas.time, "perf_counter", lambda: now[0])

    async def handler() -> str:
        now[0] += 0.005  # a step of 5 ms
        await waited
        now[0] += 0.007  # and one of 7 ms after the wait
        return "answer"

    async def main() -> tuple[object, float]:
        nonlocal waited
        waited = asyncio.get_running_loop().create_future()
        timed = client_quotas._TimedSteps(handler())
        task = asyncio.ensure_future(timed)
        await asyncio.sleep(0)
        now[0] += 1.0  # a second passes while the handler waits: not its time
        waited.set_result(None)
        return await task, timed.busy

    waited: asyncio.Future[None]
    answer, busy = asyncio.run(main())
    assert answer == "answer"
    assert busy == pytest.approx(0.012)
