"""The brokers behind `--bootstrap-server` for the commands that speak the Kafka protocol themselves, with
kio over plain sockets (confluent-kafka's AdminClient has no call for what they send): `kaflite
transactions` and `kaflite share-groups`.

Rules: a broker that cannot be reached, or answers bytes that do not decode, is one line naming it and
the exit code 1 (`fail`), never a traceback; `send_any` tries the bootstrap brokers in order and names
every one when none answers; Metadata is v12, without auto-creation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaflite.cli.common import EXIT_USAGE, _split_host_port, fail

__all__ = ["WireCluster"]


class WireCluster:
    """The brokers behind --bootstrap-server, found as Kafka's Admin client finds them (Metadata)."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.bootstrap = [_split_host_port(s) for s in bootstrap.split(",") if s.strip()]
        if not self.bootstrap:
            fail("--bootstrap-server: expected host:port, got ''", EXIT_USAGE)
        self.timeout = timeout

    def send(self, address: tuple[str, int], req: Any, response_schema: Any) -> Any:
        from kaflite.cluster.wire import request

        host, port = address
        try:
            return request(host, port, req, response_schema, self.timeout)
        except (OSError, ConnectionError, ValueError) as e:
            fail(f"cannot reach {host}:{port}: {getattr(e, 'strerror', None) or e}")

    def send_any(self, req: Any, response_schema: Any) -> Any:
        """To the first bootstrap broker that answers."""
        from kaflite.cluster.wire import request

        reasons = []
        for host, port in self.bootstrap:
            try:
                return request(host, port, req, response_schema, self.timeout)
            except (OSError, ConnectionError, ValueError) as e:
                reasons.append(f"{host}:{port} ({getattr(e, 'strerror', None) or e})")
        fail(f"cannot reach a broker at {', '.join(reasons)}")

    def metadata(self, topics: Sequence[str] | None) -> Any:
        """Metadata v12: the live brokers and `topics` (None: every topic; empty: none)."""
        from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
        from kio.schema.metadata.v12.response import MetadataResponse
        from kio.schema.types import TopicName

        wanted = None if topics is None else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t))
                                                   for t in topics)
        return self.send_any(MetadataRequest(topics=wanted, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False), MetadataResponse)

    @staticmethod
    def broker_addresses(metadata: Any) -> dict[int, tuple[str, int]]:
        return {int(b.node_id): (str(b.host), int(b.port)) for b in metadata.brokers}
