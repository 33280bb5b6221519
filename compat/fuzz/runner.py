"""Driving one target with the corpus, batch after batch, and checking it after every batch.

``Runner.run()`` starts the target (Kafka 4.3.1 or kbroker, same ``server.properties`` from
``compat.targets``, auto topic creation off), sets up the world's topics, and plays cases
``first_case .. first_case + frames - 1`` of the corpus with ``workers`` concurrent
connections. A worker keeps its connection while the broker answers and opens a new one after
a close, a timeout, a frame whose size prefix disagrees with its length, or when the case asks
for a fresh one. Topic ids in a frame are swapped for the target's own before sending. An acks=0
Produce is followed by an ApiVersions probe on the same connection: the probe's answer says the
broker is done with the produce (an answer to the produce itself is a bad answer: the protocol
says none comes). How long a case may take: ``hang_timeout_s``, plus the time the request
itself gives the broker (a Fetch's max wait, the timeout of Produce and of the admin requests),
up to ``HONOURED_WAIT_S``; a request that gives more, or a JoinGroup/SyncGroup (which wait for
other members), is "parked" rather than hung when it times out. The slowest answer per API is
kept. After a hang the broker is probed at once; if it does not answer, the
batch stops.

After each batch (``batch`` cases): the process must be alive; Metadata must be answered on a
new connection within ``liveness_deadline_s``; the log and the data directory are checked
(``invariants.py``); the peak RSS is sampled; topics the fuzz run created are deleted once they
pass ``CLEANUP_TOPICS`` / ``CLEANUP_PARTITIONS`` (every accepted create adds directories and
descriptors, on both brokers), and deleted world topics are created again. A dead or
unresponsive broker is recorded, killed and started again on the same data (waiting up to
``RECOVERY_WAIT_S`` for it to listen), and the run goes on; a broker that does not come back
ends the target's run, with the reason in its report.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compat.fuzz import control, world
from compat.fuzz.corpus import Case, Corpus
from compat.fuzz.invariants import DiskWatch, LogWatch
from compat.fuzz.layout import LayoutError, walk
from compat.fuzz.mutators import Limits
from compat.fuzz.report import BAD_ANSWER, CLOSED, CRASH, ERROR, HANG, INCOMPLETE, OK, PARKED, SILENT, TargetRun
from compat.fuzz.responses import Effects, answer_codes, decode_answer, decode_request
from compat.targets import KafkaTarget, KbrokerTarget, tail, wait_for_port

PRODUCE, JOIN_GROUP, SYNC_GROUP = 0, 11, 14
WAITING_FOR_MEMBERS = frozenset({JOIN_GROUP, SYNC_GROUP})
WAIT_FIELDS = ("max_wait", "timeout")  # Fetch; Produce, CreateTopics, DeleteTopics, CreatePartitions, ...
# APIs whose answers say what an accepted request may change on disk (responses.Effects).
EFFECT_APIS = frozenset({0, 19, 20, 21, 24, 27, 33, 37, 44})
REQUEST_DECODED_FOR_EFFECTS = frozenset({0, 19, 33, 37, 44})  # validate_only / transactional_id
HONOURED_WAIT_S = 60.0
PROBE_CORRELATION_ID = 0x7FFF_FF00
_PROBE_FRAME = struct.pack(">hhih", 18, 0, PROBE_CORRELATION_ID, 2) + b"fz"  # ApiVersions v0, client id "fz"
PROBE = struct.pack(">i", len(_PROBE_FRAME)) + _PROBE_FRAME
CLEANUP_TOPICS = 30
CLEANUP_PARTITIONS = 2_000
INTERNAL_PREFIX = "__"
UNEXPLAINED_KEPT = 20
LAG_TICK_S = 0.1
RECOVERY_WAIT_S = 900.0  # a restarted broker may take this long to listen again


@dataclass
class RunSettings:
    seed: int
    frames: int
    first_case: int = 0
    batch: int = 1_000
    workers: int = 8
    hang_timeout_s: float = 5.0
    incomplete_wait_s: float = 0.25
    liveness_deadline_s: float = 1.0
    limits: Limits = field(default_factory=Limits)


FuzzTarget = KafkaTarget | KbrokerTarget  # process targets: a pid, a log file and a data directory


def make_target(name: str, workdir: Path, kbroker_python: str) -> FuzzTarget:
    """A Kafka 4.3.1 or kbroker target under ``workdir`` (same server.properties, loopback)."""
    if name == "kafka":
        # WARN: Kafka's INFO records for every connection and partition are most of its log
        # volume in a fuzz run; only ERROR records are read.
        return KafkaTarget(workdir / "kafka", log_level="WARN")
    if name == "kbroker":
        return KbrokerTarget(workdir / "kbroker", python=kbroker_python)
    raise ValueError(f"unknown target {name!r}")


class BrokerGone(RuntimeError):
    """The broker could not be started again: the target's run ends here."""


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.port = writer.get_extra_info("sockname")[1]  # brokers log the peer as host:port
        self.history = ""  # the cases this connection carried before, for the report of a hang

    def close(self) -> None:
        self.writer.close()


def declared_wait_s(api_key: int, seen: bytes) -> float | None:
    """How long the request lets the broker take (None: it waits for other members, unbounded
    by the request): a Fetch's max wait, the timeout of Produce and of the admin requests."""
    if api_key in WAITING_FOR_MEMBERS:
        return None
    try:
        layout = walk(seen, trailing_ok=True)
    except LayoutError:
        return 0.0
    waits = [span.value for name in WAIT_FIELDS for span in layout.named(name)]
    return max(max(waits), 0) / 1000 if waits else 0.0


def _acks_zero(seen: bytes) -> bool:
    try:
        layout = walk(seen, trailing_ok=True)
    except LayoutError:
        return False
    acks = layout.named("acks")
    return layout.api_key == PRODUCE and bool(acks) and acks[0].value == 0


class Runner:
    """One target's fuzz run (see the module docstring)."""

    def __init__(self, target: FuzzTarget, corpus: Corpus, settings: RunSettings,
                 progress: Callable[[str], None] = print, save_to: Path | None = None) -> None:  # fmt: skip
        self.target = target
        self.corpus = corpus
        self.settings = settings
        self.progress = progress
        self.save_to = save_to
        self.result = TargetRun(target.name, settings.seed, settings=asdict(settings),
                                recorded_versions={str(k): v for k, v in corpus.recorded_versions().items()})
        self.effects = Effects()
        self.disk = DiskWatch(target.data_dir)
        self.log = LogWatch(target.log, target.name)
        self.id_swaps: list[tuple[bytes, bytes]] = []
        self.names_by_id: dict[uuid.UUID, str] = {}
        self.next_index = settings.first_case
        self.end_index = settings.first_case + settings.frames
        self.batch_end = 0
        self.down: str | None = None  # "crash" or "unresponsive": stop taking cases
        self.in_flight: set[int] = set()
        self.case_by_port: dict[int, int] = {}  # this batch: which case a client port last carried
        self.retry: list[int] = []  # cases lost to another case's crash, or not sent: played after the restart
        self.lost = 0

    # --- the run ---------------------------------------------------------------------------------

    async def run(self) -> TargetRun:
        started = time.monotonic()
        self.target.start()
        lag_watch = asyncio.ensure_future(self._watch_loop_lag())
        try:
            await self._prepare()
            await self._batches(started)
        except (BrokerGone, control.ControlError) as exc:  # not started again, or its set-up failed
            self.result.aborted = str(exc)
            self.progress(f"[{self.target.name}] run ended early: {exc}")
        finally:
            lag_watch.cancel()
            if self.target.is_running():
                self.target.stop()
            self._scan_log()  # what the broker logged while stopping (a task's lost exception, say)
            self.result.seconds = time.monotonic() - started
            self.result.settings["lost_in_flight_at_crashes"] = self.lost
            self.result.settings["opened_topics"] = sorted(self.effects.opened & {t.name for t in world.TOPICS})
            if self.save_to is not None:
                self.result.save(self.save_to)
        return self.result

    async def _batches(self, started: float) -> None:
        while self.next_index < self.end_index or self.retry:
            self.batch_end = min(self.next_index + self.settings.batch, self.end_index)
            await asyncio.gather(*(self._worker() for _ in range(self.settings.workers)))
            checked_at = time.monotonic()
            await self._check()
            self.result.check_seconds += time.monotonic() - checked_at
            self.result.seconds = time.monotonic() - started
            self._report_progress()
            if self.save_to is not None:
                self.result.save(self.save_to)

    async def _watch_loop_lag(self) -> None:
        """The fuzzer's own event loop falling behind would look like a broker not answering:
        record the worst lag, so a run with hangs can be told from a fuzzer that stalled."""
        while True:
            before = time.monotonic()
            await asyncio.sleep(LAG_TICK_S)
            self.result.max_loop_lag_s = max(self.result.max_loop_lag_s, time.monotonic() - before - LAG_TICK_S)

    async def _prepare(self) -> None:
        """World topics, live topic ids, disk baseline (after a start or a restart)."""
        link = await control.BrokerLink.open(self.target.host, self.target.port)
        try:
            existing = await control.describe(link, [t.name for t in world.TOPICS])
            self.effects.created_topics.update(t.name for t in world.TOPICS if t.name not in existing)
            await control.set_up_world(link)
            await self._refresh_topics(link)
        finally:
            link.close()
        self.disk.rebase()

    async def _refresh_topics(self, link: control.BrokerLink) -> dict[str, tuple[uuid.UUID, dict[int, int]]]:
        topics = await control.describe(link, None)
        self.names_by_id = {tid: name for name, (tid, _leaders) in topics.items()}
        self.id_swaps = [
            (recorded.bytes, topics[name][0].bytes)
            for name, recorded in self.corpus.topic_ids.items()
            if name in topics and recorded != topics[name][0]
        ]
        return topics

    def _report_progress(self) -> None:
        r = self.result
        totals: dict[str, int] = {}
        for api in r.apis.values():
            for outcome, n in api.outcomes.items():
                totals[outcome] = totals.get(outcome, 0) + n
        rate = r.frames / r.seconds if r.seconds else 0.0
        self.progress(
            f"{time.strftime('%H:%M:%S')} [{r.target}] {r.frames:,}/{self.settings.frames:,} frames, {rate:.0f}/s; "
            + ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
            + f"; liveness failures {len(r.liveness_failures)}, crashes {len(r.crashes)}, "
            f"unexplained ERROR {r.unexplained_log_count}, disk violations {len(r.disk_violations)}"
        )

    # --- cases -----------------------------------------------------------------------------------

    async def _connect(self) -> Connection | None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.target.host, self.target.port), self.settings.hang_timeout_s
            )
        except (OSError, TimeoutError):
            return None
        return Connection(reader, writer)

    def _take(self) -> int | None:
        if self.down is not None:
            return None
        if self.retry:
            return self.retry.pop()
        if self.next_index < self.batch_end:
            self.next_index += 1
            return self.next_index - 1
        return None

    async def _worker(self) -> None:
        conn: Connection | None = None
        try:
            while (index := self._take()) is not None:
                case = self.corpus.case(index)
                if conn is not None and case.fresh_connection:
                    conn.close()
                    conn = None
                if conn is None:
                    conn = await self._connect()
                    if conn is None:
                        self.retry.append(index)
                        await self._broker_unreachable(index)
                        return
                self.in_flight.add(index)
                outcome, codes, keep = await self._play(case, conn)
                self.in_flight.discard(index)
                if outcome is None:
                    self.retry.append(index)
                    self.lost += 1
                else:
                    self.result.tally(case.api_key, outcome, case.mutated.operators, case.source, index, codes,
                                      context=f"on a connection that carried {conn.history or 'nothing before'}")
                conn.history = f"{conn.history[-60:]} {index}:{outcome}".strip()
                if not keep:
                    conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()

    async def _broker_unreachable(self, index: int) -> None:
        if self.down is None:
            self.down = "crash" if not self.target.is_running() else "unresponsive"
            if self.down == "crash":
                self._record_crash(index)
            else:
                self._record_liveness_failure(index, "refused a connection")

    def _record_crash(self, index: int) -> None:
        self.result.crashes.append({
            "case": index, "in_flight": sorted(self.in_flight),
            "summary": f"died during case {index} (in flight: {sorted(self.in_flight)})",
            "log_tail": tail(self.target.log, 2000),
        })  # fmt: skip

    def _live_frame(self, frame: bytes) -> bytes:
        for recorded, live in self.id_swaps:
            if recorded in frame:
                frame = frame.replace(recorded, live)
        return frame

    async def _play(self, case: Case, conn: Connection) -> tuple[str | None, list[int], bool]:
        """Send one case; (outcome or None if lost to another case's crash, error codes, keep the connection)."""
        frame = self._live_frame(case.mutated.frame)
        declared = case.mutated.declared
        self.case_by_port[conn.port] = case.index
        whole = declared == len(frame)
        seen = frame[:declared] if 0 <= declared <= len(frame) else None  # the frame the broker reads
        acks_zero = seen is not None and _acks_zero(seen)
        # The probe says when an acks=0 Produce is done; after a short size prefix it would land
        # inside the bytes the broker takes for the next frame, so none is sent then.
        wire = struct.pack(">i", declared) + frame + (PROBE if acks_zero and whole else b"")
        conn.writer.write(wire)
        if seen is None:
            return await self._play_bad_size(case.index, declared, conn), [], False
        if acks_zero and not whole:
            return await self._play_unprobed_acks_zero(case, seen, conn), [], False
        api_key, api_version, correlation_id = (struct.unpack_from(">hhi", seen, 0) if len(seen) >= 8
                                                else (case.api_key, case.api_version, None))  # fmt: skip
        wait = declared_wait_s(api_key, seen)
        parked_on_timeout = wait is None or wait > HONOURED_WAIT_S
        deadline = self.settings.hang_timeout_s + (0.0 if parked_on_timeout or wait is None else wait)
        sent_at = time.monotonic()
        try:
            answer = await asyncio.wait_for(control.read_frame(conn.reader), deadline)
        except (asyncio.IncompleteReadError, ConnectionError):
            return self._after_silence(case.index, CLOSED), [], False
        except TimeoutError:
            if parked_on_timeout:
                return self._after_silence(case.index, PARKED), [], False
            return await self._after_hang(case.index), [], False
        self.result.note_latency(case.api_key, time.monotonic() - sent_at)
        if len(answer) < 4:
            return self._bad_answer(case, "an answer shorter than a response header", answer), [], False
        (answered_id,) = struct.unpack_from(">i", answer, 0)
        if acks_zero and answered_id == PROBE_CORRELATION_ID:
            self._note_unanswered_produce(seen)
            return SILENT, [], True
        if acks_zero:
            return self._bad_answer(case, "an answer to an acks=0 Produce", answer), [], False
        if answered_id != correlation_id:
            return self._bad_answer(case, f"correlation id {answered_id}, expected {correlation_id}", answer), [], False
        try:
            codes = answer_codes(api_key, api_version, answer)
        except LayoutError as exc:
            return self._bad_answer(case, f"not a response to API {api_key} v{api_version}: {exc}", answer), [], False
        if api_key in EFFECT_APIS:
            self._note_effects(api_key, api_version, seen, answer)
        return (ERROR if any(codes) else OK), codes, whole

    async def _play_unprobed_acks_zero(self, case: Case, seen: bytes, conn: Connection) -> str | None:
        """An acks=0 Produce followed by bytes of a next frame: nothing is due; a close is seen
        within the short wait for incomplete frames, else the case is silent (not confirmed)."""
        self._note_unanswered_produce(seen)
        try:
            data = await asyncio.wait_for(conn.reader.read(65536), self.settings.incomplete_wait_s)
        except ConnectionError:
            data = b""
        except TimeoutError:
            return SILENT
        return self._bad_answer(case, "an answer to an acks=0 Produce", data) if data else \
            self._after_silence(case.index, CLOSED)  # fmt: skip

    def _note_unanswered_produce(self, seen: bytes) -> None:
        request = decode_request(seen)
        if request is not None:
            self.effects.note_unanswered_produce(request, self.names_by_id)

    def _note_effects(self, api_key: int, api_version: int, seen: bytes, answer: bytes) -> None:
        try:
            response = decode_answer(api_key, api_version, answer)
        except Exception:  # values kio refuses: no effect of this answer is known
            self.result.effects_unknown += 1
            return
        request = decode_request(seen) if api_key in REQUEST_DECODED_FOR_EFFECTS else None
        self.effects.note(request, response, self.names_by_id)

    def _bad_answer(self, case: Case, why: str, answer: bytes) -> str:
        if len(self.result.bad_answers) < UNEXPLAINED_KEPT:
            self.result.bad_answers.append(f"case {case.index}: {why}; answer {answer[:64].hex()}")
        return BAD_ANSWER

    async def _play_bad_size(self, index: int, declared: int, conn: Connection) -> str | None:
        """A size prefix that is negative, over the maximum, or beyond what was sent."""
        must_close = declared < 0 or declared > self.settings.limits.max_request_bytes
        timeout = self.settings.hang_timeout_s if must_close else self.settings.incomplete_wait_s
        try:
            data = await asyncio.wait_for(conn.reader.read(65536), timeout)
        except ConnectionError:
            data = b""
        except TimeoutError:
            if must_close:
                return await self._after_hang(index)
            return self._after_silence(index, INCOMPLETE)
        return BAD_ANSWER if data else self._after_silence(index, CLOSED)  # an answer to no whole frame

    def _after_silence(self, index: int, outcome: str) -> str | None:
        """``outcome``, unless the broker died: then the first case to see it is the crash."""
        if self.target.is_running():
            return outcome
        if self.down == "crash":
            return None
        self.down = "crash"
        self._record_crash(index)
        return CRASH

    async def _after_hang(self, index: int) -> str | None:
        outcome = self._after_silence(index, HANG)
        if outcome == HANG and self.down is None:
            probe = await control.liveness(self.target.host, self.target.port, self.settings.liveness_deadline_s)
            if probe is None and self.down is None:
                self.down = "unresponsive"
                self._record_liveness_failure(index, "no answer after a hang")
        return outcome

    def _record_liveness_failure(self, after_case: int, state: str) -> None:
        self.result.liveness_failures.append({
            "batch": self.result.batches + 1, "after_case": after_case, "state": state,
            "in_flight": sorted(self.in_flight), "log_tail": tail(self.target.log, 2000),
        })  # fmt: skip

    # --- checks after each batch -------------------------------------------------------------------

    async def _check(self) -> None:
        r = self.result
        after_case = self.next_index - 1
        alive = self.target.is_running()
        if not alive and self.down != "crash":
            self.down = "crash"
            self._record_crash(-1)
        probe = await control.liveness(self.target.host, self.target.port, self.settings.liveness_deadline_s) \
            if alive else None  # fmt: skip
        if alive and probe is None:
            if self.down is None:
                self._record_liveness_failure(after_case, "no answer after the batch")
            self.down = self.down or "unresponsive"
        if probe is not None:
            r.slowest_liveness_s = max(r.slowest_liveness_s, probe)
        r.batches += 1
        self._scan_log()
        self._sample_rss()
        if self.down is not None:
            await self._restart()
            return
        for violation in self.disk.check(self.effects):
            r.disk_violations.append(f"batch {r.batches} (cases up to {after_case}): {violation}")
        try:
            await self._clean_up()
        except (control.ControlError, OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            # The broker answered the liveness probe but dropped the clean-up's connection (Kafka
            # reset it once after a restart): the next batch's check finds out whether it is well.
            self.progress(f"[{self.target.name}] clean-up after batch {r.batches} failed ({exc!r}); next batch retries")

    def _scan_log(self) -> None:
        found = self.log.scan(self.case_by_port)
        self.case_by_port = {}
        r = self.result
        r.explained_log.update(found.explained)
        for api, samples in found.explained_samples.items():
            kept = r.explained_log_samples.setdefault(api, [])
            kept += samples[: max(0, 3 - len(kept))]
        r.unexplained_log_count += len(found.unexplained)
        r.unexplained_log += found.unexplained[: max(0, UNEXPLAINED_KEPT - len(r.unexplained_log))]

    def _sample_rss(self) -> None:
        proc = self.target.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                self.result.max_rss_mb = max(self.result.max_rss_mb, int(line.split()[1]) / 1024)

    async def _restart(self) -> None:
        self.progress(f"[{self.target.name}] broker {self.down}; restarting (kill -9, start on the same data)")
        if self.target.is_running():
            self.target.kill()
        else:
            self.target.proc = None
        started = time.monotonic()
        try:
            self.target.start()
        except RuntimeError:
            # Still recovering its logs after the kill (Kafka with thousands of partitions on a
            # busy machine takes minutes): wait for the same process, a new one would start over.
            if not self.target.is_running():
                raise BrokerGone(f"{self.target.name} exited while starting again; see {self.target.log}") from None
            try:
                await asyncio.to_thread(wait_for_port, self.target.port, self.target.is_running, RECOVERY_WAIT_S,
                                        self.target.name, self.target.log)  # fmt: skip
            except RuntimeError as exc:
                raise BrokerGone(str(exc)) from None
        self.result.restart_seconds.append(round(time.monotonic() - started, 1))
        self.result.restarts += 1
        self.down = None
        self.in_flight.clear()
        await self._prepare()

    async def _clean_up(self) -> None:
        """Delete the topics fuzz frames created once there are many, and world topics that
        accepted requests grew; create deleted world topics again (with their known records)."""
        link = await control.BrokerLink.open(self.target.host, self.target.port)
        try:
            topics = await self._refresh_topics(link)
            specs = {t.name: t for t in world.TOPICS}
            created = {n: len(leaders) for n, (_tid, leaders) in topics.items()
                       if n not in specs and not n.startswith(INTERNAL_PREFIX)}  # fmt: skip
            doomed = [n for n, (_tid, leaders) in topics.items() if n in specs and len(leaders) > specs[n].partitions]
            if len(created) > CLEANUP_TOPICS or sum(created.values()) > CLEANUP_PARTITIONS:
                doomed += sorted(created)
            if doomed:
                errors = await control.delete_topics(link, doomed)
                self.effects.deleted_topics.update(n for n, code in errors.items() if code == 0)
                topics = await self._refresh_topics(link)
            missing = [t for t in world.TOPICS if t.name not in topics]
            if missing:
                self.effects.created_topics.update(t.name for t in missing)
                try:
                    await control.set_up_world(link)
                except control.ControlError as exc:  # a deletion still under way: the next batch tries again
                    self.progress(f"[{self.target.name}] world topics not recreated yet: {exc}")
                await self._refresh_topics(link)
        finally:
            link.close()
