"""The `_schemas` topic as the registry's log: a reader thread replays it into the state, and a writer
produces each change and returns once the reader has applied it. Plain Kafka client calls (confluent-kafka),
so it works against any Kafka cluster, kaflite's or not.

Rules (tests/schema_registry/test_clients.py runs them against a real broker):
- The topic is created if missing: one partition (a total order of changes), cleanup.policy=compact,
  replication factor min(3, brokers in the cluster), as Confluent's registry makes it; with three replicas
  also min.insync.replicas=2 (Confluent leaves the broker's default, 1), so an acknowledged schema is on
  two brokers and survives losing one (tests/cluster/test_schema_registry_cluster.py).
- `start` returns once every record below the high watermark it saw at start is applied: a registry
  never answers from a partial replay.
- `append` produces with acks=all and idempotence, and returns once the reader has applied the last
  record it wrote (so the answer to a write reads the write); it raises StoreError when the broker does
  not take or return the records within the timeout.
- `catch_up` returns once every record below the high watermark it reads now is applied (several
  instances: what another one wrote is in the state before this one plans or answers; test_multi_instance).
- State changes happen only in the reader thread, under the registry's lock (the condition's lock).
- Every client takes `client_config` (security.protocol, sasl.*, ssl.*: tests/security/
  test_schema_registry_secured.py). Credentials the cluster refuses stop `start` with StoreError naming
  the client's authentication error as soon as the client reports it, not after the timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kaflite.schema_registry.model import Record, State

log = logging.getLogger("kaflite.schema_registry")

TOPIC = "_schemas"


class StoreError(Exception):
    pass


class KafkaStore:
    def __init__(self, bootstrap: str, state: State, lock: threading.RLock, topic: str = TOPIC,
                 client_config: dict[str, Any] | None = None, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.state = state
        self.topic = topic
        self.timeout = timeout
        self.config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.applied = threading.Condition(lock)
        self.position = 0  # next offset to apply
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self.watermarks: Consumer | None = None
        self.watermarks_lock = threading.Lock()

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._ensure_topic()
        self.consumer = Consumer({**self.config, "group.id": "kaflite-schema-registry",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        self.consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        low, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=self.timeout)
        self.position = low  # records below the log start offset are gone: nothing to wait for there
        self.producer = Producer({**self.config, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self.thread = threading.Thread(target=self._read, name="schemas-reader", daemon=True)
        self.thread.start()
        with self.applied:
            if not self.applied.wait_for(lambda: self.position >= high or self.error is not None, self.timeout):
                raise StoreError(f"replaying {self.topic} did not reach offset {high} in {self.timeout} s")
        if self.error is not None:
            raise StoreError(f"reading {self.topic}: {self.error}")
        log.info("schema registry replayed %d records of %s (max id %d)", high, self.topic, self.state.max_id)

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(5)
        if self.consumer is not None:
            self.consumer.close()
        if self.watermarks is not None:
            self.watermarks.close()
        if self.producer is not None:
            self.producer.flush(self.timeout)
            self.producer = None  # released: its threads would otherwise outlive the broker, reconnecting

    def _metadata(self) -> tuple[AdminClient, Any]:
        """An admin client and the cluster's metadata, asked in short rounds so that an authentication
        error the client reports ends the wait at once (librdkafka would retry until the timeout, then
        say only "broker transport failure")."""
        refused: list[str] = []

        def on_error(err: KafkaError) -> None:
            if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) or err.fatal():
                refused.append(err.str())

        conf: dict[str, Any] = {**self.config, "error_cb": on_error}
        admin = AdminClient(conf)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return admin, admin.list_topics(timeout=max(0.1, min(0.5, deadline - time.monotonic())))
            except KafkaException as err:
                admin.poll(0)  # serves on_error
                if refused or time.monotonic() >= deadline:
                    del admin  # not kept alive (retrying in the background) by whoever holds the traceback
                    if refused:
                        raise StoreError(f"the cluster at {self.bootstrap} refused the registry's client: "
                                         f"{refused[0]}") from err
                    raise StoreError(f"no metadata from {self.bootstrap} in {self.timeout} s: {err}") from err

    def _ensure_topic(self) -> None:
        admin, metadata = self._metadata()
        try:
            self._create_topic(admin, metadata)
        finally:
            admin.poll(0)  # serve the error callbacks queued meanwhile, not leave librdkafka to log them

    def _create_topic(self, admin: AdminClient, metadata: Any) -> None:
        if self.topic in metadata.topics and metadata.topics[self.topic].error is None:
            return
        replicas = max(1, min(3, len(metadata.brokers)))
        config = {"cleanup.policy": "compact"}
        if replicas >= 3:
            # acks=all then means two copies: an id given out is never lost with one broker, so never given
            # again; and one broker down still leaves two to write to (with 2 replicas, 2 would stop writes)
            config["min.insync.replicas"] = "2"
        future = admin.create_topics([NewTopic(self.topic, 1, replicas, config=config)],
                                     operation_timeout=self.timeout)[self.topic]
        try:
            future.result(self.timeout)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise StoreError(f"creating {self.topic}: {err}") from err

    # ---- reader ---------------------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.consumer is not None
        try:
            while not self.stopping.is_set():
                messages = self.consumer.consume(500, timeout=0.1)
                if not messages:
                    continue
                with self.applied:
                    for msg in messages:
                        error, offset = msg.error(), msg.offset()
                        if error is not None:
                            if error.fatal():
                                raise KafkaException(error)
                            continue
                        self.state.apply(msg.key(), msg.value())
                        if offset is not None:
                            self.position = offset + 1
                    self.applied.notify_all()
        except BaseException as err:  # the registry must not serve a state it no longer follows
            log.exception("schema registry reader of %s stopped", self.topic)
            with self.applied:
                self.error = err
                self.applied.notify_all()

    def catch_up(self) -> None:
        """Wait until every record below the current high watermark is applied (StoreError after the
        timeout): what another instance wrote is then part of the state."""
        with self.watermarks_lock:
            if self.watermarks is None:
                # its own client: the reader's consumer blocks other calls while it waits in consume()
                self.watermarks = Consumer({**self.config, "group.id": "kaflite-schema-registry"})
            _, high = self.watermarks.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=self.timeout)
        with self.applied:
            if not self.applied.wait_for(lambda: self.position >= high or self.error is not None, self.timeout):
                raise StoreError(f"reading {self.topic} did not reach offset {high} in {self.timeout} s")
        if self.error is not None:
            raise StoreError(f"the {self.topic} reader stopped: {self.error}")

    # ---- writer ---------------------------------------------------------------------------------------

    def append(self, records: list[Record]) -> None:
        """Produce `records` in order and wait until they are applied. Called with the lock held (the
        registry plans under it); waiting on the condition releases it for the reader."""
        assert self.producer is not None
        if self.error is not None:
            raise StoreError(f"the {self.topic} reader stopped: {self.error}")
        offsets: list[int] = []
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets.append(msg.offset())

        for key, value in records:
            self.producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=delivered)
        if self.producer.flush(self.timeout) or errors or len(offsets) != len(records):
            raise StoreError(f"writing to {self.topic} failed: {errors or 'timed out'}")
        last = max(offsets)
        with self.applied:
            if not self.applied.wait_for(lambda: self.position > last or self.error is not None, self.timeout):
                raise StoreError(f"record at offset {last} of {self.topic} not read back in {self.timeout} s")
        if self.error is not None:
            raise StoreError(f"the {self.topic} reader stopped: {self.error}")
