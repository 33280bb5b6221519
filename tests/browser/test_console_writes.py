"""The console's write actions over its JSON API, on a single kbroker node with its HTTP listener:
refused (403) while ``kbroker.http.console.write.enable`` is false, the default; with it on, a
topic created there is what Kafka clients see, and a group's offsets reset to earliest are what
the group's consumers read back as committed — through the API and through the console's forms
in the browser.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import confluent_kafka

from kbroker.testing.local import HOST, free_port, kafka_broker
from tests.browser.console_pages import open_page, rows_of, screenshot, submit_form


def _post(url: str, body: dict) -> tuple[int, dict | str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        return error.code, json.loads(text) if error.headers.get_content_type() == "application/json" else text


def test_writes_are_refused_by_default() -> None:
    port = free_port()
    with kafka_broker(**{"kbroker.http.listeners": f"http://{HOST}:{port}"}) as node:
        status, text = _post(f"http://{HOST}:{port}/api/topics", {"name": "nope", "partitions": 1})
        assert status == 403 and "kbroker.http.console.write.enable=false" in str(text)
        status, _ = _post(f"http://{HOST}:{port}/api/groups/g/offsets", {"topic": "t", "to": "earliest"})
        assert status == 403
        assert [t.name for t in node.metadata(None).topics if t.name == "nope"] == []


def test_create_topic_and_reset_offsets_when_enabled(browser: object) -> None:
    port = free_port()
    console = f"http://{HOST}:{port}"
    with kafka_broker(**{"kbroker.http.listeners": console,
                         "kbroker.http.console.write.enable": "true"}) as node:
        status, created = _post(f"{console}/api/topics", {"name": "made-in-console", "partitions": 2})
        assert status == 201 and created == {"name": "made-in-console", "partitions": 2}
        [topic] = node.metadata(["made-in-console"]).topics
        assert topic.error_code == 0 and len(topic.partitions) == 2
        status, again = _post(f"{console}/api/topics", {"name": "made-in-console", "partitions": 2})
        assert status == 400 and again["error"] == "TOPIC_ALREADY_EXISTS"

        producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap_servers})
        for n in range(5):
            producer.produce("made-in-console", value=str(n).encode(), partition=0)
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": "resettable",
                                             "enable.auto.commit": False})
        tp = confluent_kafka.TopicPartition("made-in-console", 0)
        try:
            consumer.commit(offsets=[confluent_kafka.TopicPartition("made-in-console", 0, 5)], asynchronous=False)
            status, reset = _post(f"{console}/api/groups/resettable/offsets",
                                  {"topic": "made-in-console", "partitions": [0], "to": "earliest"})
            assert status == 200 and reset["offsets"] == [{"topic": "made-in-console", "partition": 0, "offset": 0}]
            assert consumer.committed([tp], timeout=30)[0].offset == 0
            status, reset = _post(f"{console}/api/groups/resettable/offsets",
                                  {"topic": "made-in-console", "partitions": [0], "to": 3})
            assert status == 200 and consumer.committed([tp], timeout=30)[0].offset == 3
            # The same two actions through the console's forms.
            open_page(browser, f"{console}/#/topics")
            assert submit_form(browser, "create-topic", {"name": "from-the-form", "partitions": "3"},
                               "create-result") == "created from-the-form"
            assert {row[0]: row[1] for row in rows_of(browser, "topics-table")}["from-the-form"] == "3"
            open_page(browser, f"{console}/#/group/resettable")
            reset_shown = submit_form(browser, "reset-offsets", {"topic": "made-in-console", "to": "2"}, "reset-result")
            assert reset_shown == "reset"
            # Every partition of the topic, as kafka-consumer-groups --reset-offsets --topic does; the
            # empty partition 1 clamps offset 2 to its end, 0.
            assert rows_of(browser, "lag-table") == [["made-in-console", "0", "2", "5", "3"],
                                                     ["made-in-console", "1", "0", "0", "0"]]
            screenshot(browser, "group-reset")
            assert consumer.committed([tp], timeout=30)[0].offset == 2
        finally:
            consumer.close()
