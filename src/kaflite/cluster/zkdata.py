"""Kafka's ZooKeeper layout: every znode path and the exact JSON stored in it (Kafka's `ZkData`).

Rules:
- paths and JSON are Kafka 3.x's (ZooKeeper mode), so `zkCli.sh` and Kafka's own tools read a kaflite
  cluster as a Kafka cluster: same keys, same value types (timestamps and producer-id bounds are JSON
  strings, as Kafka writes them), compact JSON as Jackson writes it;
- decoding accepts what Kafka writes (older versions included where Kafka accepts them) and refuses
  anything else with `ZkDataError` naming the znode, never a bare KeyError;
- this module is pure (bytes in, values out): the client that reads and writes znodes is `cluster.zk`.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BrokerInfo",
    "ControllerInfo",
    "LeaderAndIsr",
    "ProducerIdsBlock",
    "TopicAssignment",
    "ZkDataError",
    "ZkEndpoint",
    "parse_connect",
]

# --- paths (Kafka's *ZNode objects) ---------------------------------------------------------------
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONSUMERS = "/consumers"
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
# kaflite's own: a broker about to stop asks for controlled shutdown with an ephemeral child here (Kafka
# sends a ControlledShutdown request, API 7, for which kio has no schema)
CONTROLLED_SHUTDOWN = "/kaflite/controlled_shutdown"

# Kafka's ZkData.PersistentZkPaths: created (empty) at broker start-up when missing
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
) + tuple(f"{CONFIG}/{t}" for t in CONFIG_TYPES)

# Kafka's KafkaController.InitialControllerEpoch / InitialControllerEpochZkVersion
INITIAL_CONTROLLER_EPOCH = 0
# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PRODUCER_ID_BLOCK_SIZE = 1000
# ZooKeeper: a conditional write that matches any version
MATCH_ANY_VERSION = -1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG}/topics/{topic}"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


class ZkDataError(ValueError):
    """A znode holds data this layout cannot read (the message names the znode)."""


def _dumps(value: object) -> bytes:
    # Jackson's compact form: no spaces
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZkDataError(f"{path}: empty znode")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZkDataError(f"{path}: not JSON ({e})") from e
    if not isinstance(value, dict):
        raise ZkDataError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _int(path: str, obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZkDataError(f"{path}: {key!r} must be an integer, got {value!r}")
    return value


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZkDataError(f"{path}: {what} must be a list of integers, got {value!r}")
    return tuple(value)


# --- zookeeper.connect ------------------------------------------------------------------------------
_HOST = re.compile(r"^[A-Za-z0-9._\-\[\]:]+$")


def parse_connect(value: str) -> tuple[list[tuple[str, int]], str | None]:
    """Split `zookeeper.connect` ("h1:p1,h2:p2/chroot/path") into hosts and the chroot (None: root).

    The port defaults to 2181 as ZooKeeper's; the chroot follows ZooKeeper's path rules (starts with
    '/', no trailing '/', no empty, '.' or '..' segment). ValueError with a one-line reason otherwise.
    """
    text = value.strip()
    if not text:
        raise ValueError("zookeeper.connect is empty: expected host:port[,host:port...][/chroot]")
    slash = text.find("/")
    hosts_part, chroot = (text, None) if slash < 0 else (text[:slash], text[slash:])
    hosts: list[tuple[str, int]] = []
    for item in hosts_part.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"zookeeper.connect {value!r}: empty host in the host list")
        host, sep, port_text = item.rpartition(":")
        if not sep:
            host, port_text = item, "2181"
        if not host or not _HOST.match(host):
            raise ValueError(f"zookeeper.connect {value!r}: bad host {host!r}")
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"zookeeper.connect {value!r}: bad port {port_text!r} (1..65535)")
        hosts.append((host, int(port_text)))
    if chroot is not None:
        if chroot == "/":
            chroot = None
        else:
            segments = chroot[1:].split("/")
            if chroot.endswith("/") or any(s in ("", ".", "..") for s in segments):
                raise ValueError(
                    f"zookeeper.connect {value!r}: bad chroot {chroot!r} (a path such as /kafka or "
                    "/a/b: no trailing '/', no empty, '.' or '..' segment)"
                )
    return hosts, chroot


# --- /brokers/ids/<id> --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ZkEndpoint:
    """One advertised listener as Kafka writes it: "NAME://host:port" plus its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


_ENDPOINT = re.compile(r"^([A-Za-z0-9_.\-]+)://\[?([^\]]*)\]?:(-?\d+)$")


@dataclass(frozen=True)
class BrokerInfo:
    """The registration of a live broker (Kafka's `BrokerInfo`, JSON version 5)."""

    id: int
    endpoints: tuple[ZkEndpoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    version: int = 5

    def encode(self) -> bytes:
        # host/port: the first PLAINTEXT endpoint, for old clients (Kafka writes null/-1 without one)
        plain = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, Any] = {
            "features": {k: dict(v) for k, v in self.features.items()},
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in self.endpoints},
            "endpoints": [e.connection_string for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "port": plain.port if plain else -1,
            "host": plain.host if plain else None,
            "version": self.version,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        return _dumps(obj)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> BrokerInfo:
        path = broker_path(broker_id)
        obj = _loads(path, data)
        version = _int(path, obj, "version")
        if version < 1:
            raise ZkDataError(f"{path}: unsupported broker registration version {version}")
        if version == 1:
            endpoints: tuple[ZkEndpoint, ...] = (
                ZkEndpoint("PLAINTEXT", str(obj.get("host")), _int(path, obj, "port")),
            )
        else:
            protocols = obj.get("listener_security_protocol_map") or {}
            if not isinstance(protocols, dict):
                raise ZkDataError(f"{path}: listener_security_protocol_map must be an object")
            raw = obj.get("endpoints")
            if not isinstance(raw, list):
                raise ZkDataError(f"{path}: endpoints must be a list of NAME://host:port")
            eps = []
            for text in raw:
                m = _ENDPOINT.match(str(text))
                if not m:
                    raise ZkDataError(f"{path}: bad endpoint {text!r} (expected NAME://host:port)")
                name = m.group(1)
                # without the map, Kafka takes the listener name as the security protocol
                eps.append(ZkEndpoint(name, m.group(2), int(m.group(3)), str(protocols.get(name, name))))
            endpoints = tuple(eps)
        rack = obj.get("rack")
        ts = obj.get("timestamp", "0")
        features = obj.get("features") or {}
        return cls(
            id=broker_id,
            endpoints=endpoints,
            rack=str(rack) if rack is not None else None,
            timestamp_ms=int(ts) if str(ts).lstrip("-").isdigit() else 0,
            jmx_port=int(obj.get("jmx_port", -1)),
            features=features if isinstance(features, dict) else {},
            version=version,
        )


# --- /controller, /controller_epoch -----------------------------------------------------------------------
@dataclass(frozen=True)
class ControllerInfo:
    """Who is controller (the ephemeral /controller znode, Kafka's version 1)."""

    broker_id: int
    timestamp_ms: int = 0

    def encode(self) -> bytes:
        return _dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)})

    @classmethod
    def decode(cls, data: bytes | None) -> ControllerInfo:
        obj = _loads(CONTROLLER, data)
        ts = str(obj.get("timestamp", "0"))
        return cls(_int(CONTROLLER, obj, "brokerid"), int(ts) if ts.lstrip("-").isdigit() else 0)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(f"{CONTROLLER_EPOCH}: not an integer: {data!r}") from e


# --- /brokers/topics/<t> ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment (partition -> replicas), its id, and a reassignment in progress."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def as_json(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items()) if r}

        obj: dict[str, Any] = {
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "adding_replicas": as_json(self.adding_replicas),
            "removing_replicas": as_json(self.removing_replicas),
            "version": 3,
        }
        if self.topic_id is not None:
            obj["topic_id"] = kafka_uuid(self.topic_id)
        return _dumps(obj)

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> TopicAssignment:
        path = topic_path(topic)
        obj = _loads(path, data)

        def parts(key: str) -> dict[int, tuple[int, ...]]:
            raw = obj.get(key) or {}
            if not isinstance(raw, dict):
                raise ZkDataError(f"{path}: {key} must be an object")
            out: dict[int, tuple[int, ...]] = {}
            for p, replicas in raw.items():
                if not str(p).isdigit():
                    raise ZkDataError(f"{path}: {key} has a bad partition {p!r}")
                out[int(p)] = _int_list(path, replicas, f"{key}[{p}]")
            return out

        tid = obj.get("topic_id")
        return cls(
            topic=topic,
            partitions=parts("partitions"),
            topic_id=parse_kafka_uuid(str(tid)) if tid is not None else None,
            adding_replicas=parts("adding_replicas"),
            removing_replicas=parts("removing_replicas"),
        )


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka writes a Uuid as 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    try:
        if len(text) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        return uuid.UUID(text)
    except ValueError as e:
        raise ZkDataError(f"bad topic_id {text!r}") from e


# --- /brokers/topics/<t>/partitions/<p>/state ---------------------------------------------------------------
@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR as last written by `controller_epoch`'s controller.

    `zk_version` is the state znode's version this value was read at (or written as): the expected
    version of the next compare-and-set. -1 before it exists; it also serves as the partition epoch.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    NO_LEADER = -1

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, path: str, data: bytes | None, zk_version: int) -> LeaderAndIsr:
        obj = _loads(path, data)
        return cls(
            leader=_int(path, obj, "leader"),
            leader_epoch=_int(path, obj, "leader_epoch"),
            isr=_int_list(path, obj.get("isr"), "isr"),
            controller_epoch=_int(path, obj, "controller_epoch"),
            zk_version=zk_version,
        )


# --- /config/<type>/<name>, /config/changes ---------------------------------------------------------------
def encode_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    obj = _loads(path, data)
    config = obj.get("config") or {}
    if not isinstance(config, dict):
        raise ZkDataError(f"{path}: config must be an object")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    """A /config/changes/config_change_<seq> notification (version 2: the entity path)."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(path: str, data: bytes | None) -> tuple[str, str]:
    obj = _loads(path, data)
    entity = obj.get("entity_path")
    if not isinstance(entity, str) or "/" not in entity:
        raise ZkDataError(f"{path}: entity_path must be '<type>/<name>', got {entity!r}")
    kind, _, name = entity.partition("/")
    return kind, name


# --- /admin/reassign_partitions, /admin/preferred_replica_election -----------------------------------------
def encode_reassignment(moves: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())
            ],
        }
    )


def decode_reassignment(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
    obj = _loads(REASSIGN_PARTITIONS, data)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for item in obj.get("partitions") or []:
        if not isinstance(item, dict):
            raise ZkDataError(f"{REASSIGN_PARTITIONS}: each partition must be an object")
        out[(str(item.get("topic")), _int(REASSIGN_PARTITIONS, item, "partition"))] = _int_list(
            REASSIGN_PARTITIONS, item.get("replicas"), "replicas"
        )
    return out


def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    """/admin/preferred_replica_election and /isr_change_notification: {"version":1,"partitions":[...]}."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]})


def decode_partition_list(path: str, data: bytes | None) -> set[tuple[str, int]]:
    obj = _loads(path, data)
    out = set()
    for item in obj.get("partitions") or []:
        if not isinstance(item, dict):
            raise ZkDataError(f"{path}: each partition must be an object")
        out.add((str(item.get("topic")), _int(path, item, "partition")))
    return out


# --- /cluster/id, /latest_producer_id_block ------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    obj = _loads(CLUSTER_ID, data)
    cid = obj.get("id")
    if not isinstance(cid, str) or not cid:
        raise ZkDataError(f"{CLUSTER_ID}: 'id' must be a non-empty string")
    return cid


@dataclass(frozen=True)
class ProducerIdsBlock:
    """Producer ids [first, last] handed to `broker` (Kafka's `ProducerIdsBlock`, bounds inclusive)."""

    broker: int
    first: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def next_block(self, broker: int) -> ProducerIdsBlock:
        return ProducerIdsBlock(broker, self.last + 1, PRODUCER_ID_BLOCK_SIZE)

    def encode(self) -> bytes:
        return _dumps(
            {"version": 1, "broker": self.broker, "block_start": str(self.first), "block_end": str(self.last)}
        )

    @classmethod
    def decode(cls, data: bytes | None) -> ProducerIdsBlock:
        obj = _loads(PRODUCER_ID_BLOCK, data)
        try:
            start, end = int(obj["block_start"]), int(obj["block_end"])
        except (KeyError, TypeError, ValueError) as e:
            raise ZkDataError(f"{PRODUCER_ID_BLOCK}: block_start/block_end must be integer strings") from e
        return cls(_int(PRODUCER_ID_BLOCK, obj, "broker"), start, end - start + 1)
