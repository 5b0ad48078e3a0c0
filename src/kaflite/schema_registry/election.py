"""Several registry instances over one `_schemas` topic: one writer, elected through a consumer group as
Confluent's registry elects its leader, and the others forwarding writes to it over HTTP.

Rules (tests/schema_registry/test_multi_instance.py runs them on one broker):
- Every instance joins the group `<topic>-writer` subscribed to the topic (one partition), with its
  advertised URL as client.id; the member the group assigns partition 0 is the writer. The partition is
  paused at once: the group only elects, the store's own consumer reads.
- A follower finds the writer's URL by describing the group (the member whose assignment holds the
  partition). Writes (register, delete, config and mode changes) received by a follower are sent to the
  writer as they came and its answer returned; the follower then waits until its own reader has applied
  the topic up to the end it sees, so a write through any instance is readable through it at once.
- The writer reads the topic to the high watermark before planning each write, so a write planned right
  after taking over sees every record its predecessor wrote: ids are given from the whole history.
- No writer known within the timeout: 500 with Confluent's 50003 ("Unknown leader"); the writer
  unreachable: 500 with 50004 ("Error while forwarding the request to the leader").
- The group thread polls (heartbeats) off the event loop; `stop` leaves the group, so the others elect a
  new writer at once rather than after the session timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

log = logging.getLogger("kaflite.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class WriterElection:
    def __init__(self, config: dict[str, Any], topic: str, url: str, timeout: float = 10.0) -> None:
        self.config = config
        self.topic = topic
        self.group = f"{topic}-writer"
        self.url = url
        self.timeout = timeout
        self.is_writer = False
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.consumer: Consumer | None = None
        self.admin = AdminClient(config)

    def start(self) -> None:
        self.consumer = Consumer({**self.config, "group.id": self.group, "client.id": self.url,
                                  "enable.auto.commit": False, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, "auto.offset.reset": "latest"})
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._revoked)
        self.thread = threading.Thread(target=self._poll, name="schemas-election", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(5)
        if self.consumer is not None:
            self.consumer.close()  # leaves the group: the others rebalance now

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            consumer.pause(partitions)
        self.is_writer = any(p.partition == 0 for p in partitions)
        log.info("schema registry %s is %s", self.url, "the writer" if self.is_writer else "a follower")

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.is_writer = False

    def _poll(self) -> None:
        assert self.consumer is not None
        while not self.stopping.is_set():
            self.consumer.poll(0.1)  # serves the group protocol; the paused partition yields nothing

    def writer_url(self) -> str | None:
        """The writer's URL as the group describes it (None when no member holds the partition)."""
        if self.is_writer:
            return self.url
        try:
            future = self.admin.describe_consumer_groups([self.group], request_timeout=self.timeout)[self.group]
            description = future.result(self.timeout)
        except Exception as err:  # the broker or group not reachable right now: no writer known
            log.debug("describing %s: %s", self.group, err)
            return None
        for member in description.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            if any(tp.topic == self.topic and tp.partition == 0 for tp in assignment):
                return str(member.client_id)
        return None


def forwarder(election: WriterElection, catch_up: Callable[[], None], timeout: float
              ) -> Callable[[str, str, dict[str, str], Any], tuple[int, Any] | None]:
    """The Registry's forward hook: None to handle a write here (this instance writes, caught up first),
    else the writer's answer."""

    def forward(method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any] | None:
        deadline = time.monotonic() + timeout
        url = election.writer_url()
        while url is None and time.monotonic() < deadline:
            time.sleep(0.1)
            url = election.writer_url()
        if url is None:
            return 500, {"error_code": 50003, "message": "Unknown leader"}
        if url == election.url:
            catch_up()
            return None
        target = url.rstrip("/") + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(target, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                status, raw = answer.status, answer.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        except (urllib.error.URLError, OSError) as err:
            return 500, {"error_code": 50004, "message": f"Error while forwarding the request to the leader: "
                                                         f"{getattr(err, 'reason', err)}"}
        catch_up()  # the writer answered once it read its records: read them here too before answering
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return 500, {"error_code": 50004, "message": "Error while forwarding the request to the leader: "
                                                         "the leader's answer is not JSON"}

    return forward
