"""`CoordinatorBroker`: what the coordinator services (and the handlers' service hooks) use of the broker,
as a typed Protocol instead of `Any`; `ShareBroker`: what the share-group handlers (handlers/share.py,
share_admin.py) use of it, the same members and the purgatory and log directories.
`kaflite.server.broker.Broker` is both (checked by mypy in server/broker.py: this module does not import
the broker, which imports the services that import this); the tests hand the services stand-ins with only
these members.

Rules:
- the services reach the broker only through these members (mypy refuses any other);
- every member is read-only here (properties): a service never rebinds the broker's parts;
- the per-broker services and handler state are in `services` (server/services.py), each in a typed slot
  declared by the module that owns it: no untyped dictionary of the broker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kaflite.cluster.metadata import MetadataImage, TopicImage
from kaflite.server.config import BrokerConfig
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica import ReplicaManager
from kaflite.server.security.client import BrokerConnector
from kaflite.server.services import BrokerServices
from kaflite.storage.log import Log

__all__ = ["CoordinatorBroker", "ImageSource", "ProducerIds", "ShareBroker"]


class ImageSource(Protocol):
    """The metadata writer as the services see it: they follow its images."""

    def subscribe(self, listener: Callable[[MetadataImage, MetadataImage], None]) -> None: ...


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


class CoordinatorBroker(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def node_id(self) -> int: ...

    @property
    def services(self) -> BrokerServices: ...  # the services themselves, each in its typed slot

    @property
    def metadata(self) -> MetadataImage: ...

    @property
    def metadata_writer(self) -> ImageSource: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def producer_ids(self) -> ProducerIds: ...

    @property
    def inter_broker_connector(self) -> BrokerConnector | None: ...

    def setting(self, key: str) -> Any: ...

    def now_ms(self) -> int: ...

    def add_task(self, task: asyncio.Future[Any]) -> None: ...

    def get_log(self, topic: str, partition: int) -> Log: ...

    def ensure_internal_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                              replication_key: str) -> TopicImage | None: ...

    async def create_internal_topic_async(self, name: str, num_partitions: int,
                                          configs: Mapping[str, str]) -> None: ...



class ShareBroker(CoordinatorBroker, Protocol):
    @property
    def purgatory(self) -> Purgatory: ...

    @property
    def log_dirs(self) -> list[Path]: ...
