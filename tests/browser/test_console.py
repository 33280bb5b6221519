"""The web console in a real browser (Debian's chromium driven by chromedriver through selenium)
against a live kbroker cluster: one controller and three brokers, each with its HTTP listener.

The test produces and commits with confluent-kafka, then walks the console as a user would —
brokers, topics → topic → partition → messages and timeline, groups → group → lag, throughput,
clients — and asserts what the pages show against what the clients did: topic names, offsets,
message values, committed offsets and lag; a broker with no replica of a partition shows its
messages read from the leader. Each page is saved as <page>.png (see console_pages for where;
the README shows them).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest
from selenium.webdriver.common.by import By

from kbroker.testing.local import HOST, LocalCluster, free_port
from tests.browser.console_pages import PAGE_TIMEOUT_S, click_link, open_page, rows_of, screenshot

TOPIC, GROUP, RECORDS, COMMITTED, PARTITION = "orders", "billing", 10, 6, 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[LocalCluster, dict[int, str]]]:
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-console-"))
    cluster = LocalCluster(workdir, 3, {})
    consoles = {}
    for broker in cluster.brokers:
        port = free_port()
        broker.settings["kbroker.http.listeners"] = f"http://{HOST}:{port}"
        consoles[broker.node_id] = f"http://{HOST}:{port}"
    try:
        cluster.start()
        yield cluster, consoles
    finally:
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _produce_and_commit(cluster: LocalCluster) -> object:
    """RECORDS JSON values to partition PARTITION, and the group's commit at COMMITTED; the
    producer stays connected (the clients page lists it)."""
    cluster.create_topic(TOPIC, partitions=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "client.id": "console-producer", "linger.ms": 0})
    for n in range(RECORDS):
        producer.produce(TOPIC, key=f"k{n}".encode(), value=json.dumps({"n": n}).encode(), partition=PARTITION,
                         headers=[("source", b"browser-test")])
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        committed = consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, PARTITION, COMMITTED)],
                                    asynchronous=False)
        assert committed[0].error is None
    finally:
        consumer.close()
    return producer


def _coordinator(cluster: LocalCluster) -> int:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    description = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
    return int(description.coordinator.id)


def test_console_pages(cluster: tuple[LocalCluster, dict[int, str]], browser: object) -> None:
    nodes, consoles = cluster
    producer = _produce_and_commit(nodes)
    leader = nodes.leader(TOPIC, PARTITION)
    console = consoles[leader]

    open_page(browser, f"{console}/#/brokers")
    brokers = rows_of(browser, "brokers-table")
    assert [(row[0], row[2]) for row in brokers] == [("1", "unfenced"), ("2", "unfenced"), ("3", "unfenced")]
    screenshot(browser, "brokers")

    open_page(browser, f"{console}/#/topics")
    topics = {row[0]: row for row in rows_of(browser, "topics-table")}
    assert topics[TOPIC][1:3] == ["3", "3"]  # partitions, replication factor
    assert topics[TOPIC][5] == str(RECORDS)
    screenshot(browser, "topics")

    click_link(browser, TOPIC, f"#/topic/{TOPIC}")
    partitions = {row[0]: row for row in rows_of(browser, "partitions-table")}
    assert partitions[str(PARTITION)][1] == str(leader)
    assert partitions[str(PARTITION)][7:9] == [str(RECORDS), str(RECORDS)]  # HW, LEO
    assert partitions["0"][7] == "0"
    screenshot(browser, "topic")

    click_link(browser, str(PARTITION), f"#/partition/{TOPIC}/{PARTITION}")
    messages = rows_of(browser, "messages-table")
    assert [row[0] for row in messages] == [str(n) for n in range(RECORDS)]
    assert [json.loads(row[3]) for row in messages] == [{"n": n} for n in range(RECORDS)]
    assert [row[2] for row in messages] == [f"k{n}" for n in range(RECORDS)]
    assert all(row[4] == "source=browser-test" for row in messages)
    timeline = rows_of(browser, "timeline-table")
    assert timeline[0][2].startswith("created, leader")
    screenshot(browser, "partition")

    # From offset 7 shown as hex, read_committed (no transactions: the same records).
    open_page(browser, f"{console}/#/partition/{TOPIC}/{PARTITION}?offset=7&format=hex&isolation=read_committed")
    hex_rows = rows_of(browser, "messages-table")
    assert [row[0] for row in hex_rows] == ["7", "8", "9"]
    assert hex_rows[0][3] == " ".join(f"{b:02x}" for b in json.dumps({"n": 7}).encode())
    screenshot(browser, "messages-hex")

    coordinator = _coordinator(nodes)
    # Another broker's console lists the group too (ListGroups to its coordinator).
    elsewhere = next(node_id for node_id in consoles if node_id != coordinator)
    open_page(browser, f"{consoles[elsewhere]}/#/groups")
    groups = {row[0]: row for row in rows_of(browser, "groups-table")}
    assert groups[GROUP][2:] == ["Empty", "—", "—", str(coordinator)]
    click_link(browser, GROUP, f"#/group/{GROUP}")  # its page asks the coordinator
    assert browser.find_element(By.ID, "group-coordinator").text == f"broker {coordinator}"
    assert rows_of(browser, "lag-table") == [[TOPIC, str(PARTITION), str(COMMITTED), str(RECORDS),
                                              str(RECORDS - COMMITTED)]]
    open_page(browser, f"{consoles[coordinator]}/#/groups")
    groups = {row[0]: row for row in rows_of(browser, "groups-table")}
    assert groups[GROUP][1:] == ["classic", "Empty", "0", str(RECORDS - COMMITTED), str(coordinator)]
    screenshot(browser, "groups")

    click_link(browser, GROUP, f"#/group/{GROUP}")
    lag = rows_of(browser, "lag-table")
    assert lag == [[TOPIC, str(PARTITION), str(COMMITTED), str(RECORDS), str(RECORDS - COMMITTED)]]
    screenshot(browser, "group")

    open_page(browser, f"{console}/#/throughput")
    # Records produced while the page samples (each second) show up as a rate on the topic's row.
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while time.monotonic() < deadline:
        producer.produce(TOPIC, value=b"tick", partition=PARTITION)
        producer.flush(10)
        rows = {row[0]: row for row in rows_of(browser, "throughput-table")}
        if TOPIC in rows and float(rows[TOPIC][2]) > 0:
            break
    assert float(rows[TOPIC][2]) > 0
    screenshot(browser, "throughput")

    open_page(browser, f"{console}/#/clients")
    clients = [row for row in rows_of(browser, "clients-table") if row[0] == "console-producer"]
    assert clients and clients[0][1] == "confluent-kafka-python" and clients[0][3] == "PLAINTEXT"
    assert "produce v" in clients[0][6]
    screenshot(browser, "clients")


def test_messages_of_a_partition_held_elsewhere(cluster: tuple[LocalCluster, dict[int, str]],
                                                browser: object) -> None:
    """A broker with no replica of a partition reads its messages from the leader over the Kafka
    protocol and says so; read_committed leaves out an aborted transaction's records there too."""
    nodes, consoles = cluster
    topic = "elsewhere"
    nodes.create_topic(topic, partitions=1, replication_factor=1)
    leader = nodes.leader(topic)
    other = next(node_id for node_id in consoles if node_id != leader)
    producer = confluent_kafka.Producer({"bootstrap.servers": nodes.bootstrap_servers,
                                         "transactional.id": "console-elsewhere"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(2):
        producer.produce(topic, value=f"aborted-{n}".encode())
    assert producer.flush(30) == 0  # written before the abort (which would drop unsent records)
    producer.abort_transaction(30)  # records 0 and 1, the abort marker at 2
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(30)  # record 3, the commit marker at 4

    read = f"/api/topics/{topic}/partitions/0/messages?offset=0&isolation=read_committed"
    # commit_transaction returns before the coordinator's commit marker is written: until then
    # the last stable offset (3) keeps the committed record out of read_committed reads.
    committed: dict = _wait_for("the commit marker", lambda: (found := _api(consoles[other], read))["records"]
                                and found)  # type: ignore[assignment]
    assert [r["offset"] for r in committed["records"]] == [3]
    assert committed["read_from"] == {"broker": leader, "over": "Fetch"}
    assert committed["next_offset"] == 4 and committed["bound"] == 5

    open_page(browser, f"{consoles[other]}/#/partition/{topic}/0")
    assert [(row[0], row[3]) for row in rows_of(browser, "messages-table")] == [
        ("0", "aborted-0"), ("1", "aborted-1"), ("3", "committed")]
    assert browser.find_element(By.ID, "read-from").text == (  # type: ignore[attr-defined]
        f"Broker {other} holds no replica of this partition: read from its leader, broker {leader}, "
        "with a Kafka Fetch request.")
    screenshot(browser, "partition-elsewhere")
    open_page(browser, f"{consoles[other]}/#/partition/{topic}/0?isolation=read_committed")
    assert [(row[0], row[3]) for row in rows_of(browser, "messages-table")] == [("3", "committed")]


def _api(console: str, path: str) -> dict:
    with urllib.request.urlopen(f"{console}{path}", timeout=10) as response:
        return json.loads(response.read())


def _wait_for(what: str, check: object, timeout: float = 30.0) -> object:
    """Poll ``check`` until it returns something truthy (its value) or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_every_broker_describes_a_group_with_its_members_and_lag(cluster: tuple[LocalCluster, dict[int, str]],
                                                                 protocol: str) -> None:
    """A group's page is the same on every broker's console: its coordinator's own view, and on
    the others what the coordinator answers DescribeGroups or ConsumerGroupDescribe (KIP-848) and
    OffsetFetch, as kafka-consumer-groups --describe asks."""
    nodes, consoles = cluster
    topic, group = f"members-{protocol}", f"members-{protocol}"
    nodes.create_topic(topic, partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": nodes.bootstrap_servers})
    for partition in (0, 1):
        for n in range(3):
            producer.produce(topic, value=b"%d" % n, partition=partition)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": nodes.bootstrap_servers, "group.id": group,
                                         "group.protocol": protocol, "client.id": f"{protocol}-member",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        _wait_for("the member's assignment", lambda: consumer.poll(0.2) is not None and consumer.assignment())
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)

        def described(console: str) -> dict:
            g = _api(console, f"/api/groups/{group}")
            return {key: g[key] for key in ("type", "state", "coordinator", "lag")} | {
                "members": [(m["client_id"], m["assignment"]) for m in g["members"]]}

        def stable(console: str) -> dict | None:
            view = described(console)
            return view if view["state"] == "Stable" else None

        views = {node_id: _wait_for(f"broker {node_id}'s view of the Stable group", lambda c=console: stable(c))
                 for node_id, console in consoles.items()}
        first = views[1]
        assert first["type"] == protocol and first["members"] == [(f"{protocol}-member", {topic: [0, 1]})]
        assert [(row["partition"], row["committed_offset"], row["end_offset"], row["lag"]) for row in first["lag"]] \
            == [(0, 1, 3, 2)]
        assert views[2] == first and views[3] == first
    finally:
        consumer.close()
        producer.flush(10)


def test_timeline_marks_an_unclean_election(cluster: tuple[LocalCluster, dict[int, str]], browser: object) -> None:
    """Followers down, three records only on the leader (acks=1), leader crashed, a follower
    back: the controller elects it uncleanly and the old leader, back too, truncates the three.
    The timeline shows the two ISR shrinks and the UNCLEAN election, truncating from offset 5."""
    nodes, consoles = cluster
    topic = "ledger"
    nodes.create_topic(topic, partitions=1, config={"unclean.leader.election.enable": "true",
                                                    "min.insync.replicas": "1"})
    leader_id = nodes.leader(topic)
    followers = [b for b in nodes.brokers if b.node_id != leader_id]
    leader = nodes.broker(leader_id)
    producer = confluent_kafka.Producer({"bootstrap.servers": nodes.bootstrap_servers, "acks": "all"})
    for n in range(5):
        producer.produce(topic, value=f"kept-{n}".encode())
    assert producer.flush(30) == 0
    _wait_for("every replica at offset 5", lambda: all(
        _api(consoles[b.node_id], f"/api/topics/{topic}")["partitions"][0]["log_end_offset"] == 5
        for b in nodes.brokers))
    for follower in followers:
        follower.kill()
    _wait_for("the ISR to be the leader alone",
              lambda: _api(consoles[leader_id], f"/api/topics/{topic}")["partitions"][0]["isr"] == [leader_id])
    lone = confluent_kafka.Producer({"bootstrap.servers": leader.bootstrap_servers, "acks": "1"})
    for n in range(3):
        lone.produce(topic, value=f"lost-{n}".encode())
    assert lone.flush(30) == 0
    leader.kill()
    survivor = followers[0]
    survivor.start()
    _wait_for("the unclean election", lambda: _api(consoles[survivor.node_id], f"/api/topics/{topic}")
              ["partitions"][0]["leader"] == survivor.node_id)
    leader.start()
    _wait_for("the old leader to truncate to 5", lambda: _api(consoles[leader_id], f"/api/topics/{topic}")
              ["partitions"][0]["log_end_offset"] == 5)
    open_page(browser, f"{consoles[survivor.node_id]}/#/partition/{topic}/0")
    assert [row[3] for row in rows_of(browser, "messages-table")] == [f"kept-{n}" for n in range(5)]
    timeline = rows_of(browser, "timeline-table")
    events = [row[2] for row in timeline]
    assert events[0].startswith(f"created, leader {leader_id}")
    # The followers' fencing shrank the ISR twice; the leader's crash moved the lead uncleanly
    # (the controller fences it and elects in one decision: no offline step in between). The old
    # leader, truncated, may be back in the ISR or not yet (not waited for: in some runs it stayed
    # out for over 30 s with no new records, which is not what this test is about).
    isr_changes = [row[3] for row in timeline if row[2] == "ISR change"]
    assert sorted(isr_changes[:2]) == sorted(f"shrink −{f.node_id}" for f in followers), " | ".join(events)
    assert isr_changes[2:] in ([], [f"expand +{leader_id}"]), " | ".join(events)
    unclean = [e for e in events if e.startswith("UNCLEAN election")]
    assert len(unclean) == 1 and unclean[0].startswith(f"UNCLEAN election: leader {leader_id} → {survivor.node_id} ")
    assert unclean[0].endswith("records from offset 5 on were truncated")
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline-table tr.unclean")
    screenshot(browser, "timeline")
    followers[1].start()
