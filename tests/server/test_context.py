"""The request context: strict `build()`, the session a request came in on, `authorize`, and the
throttle time the dispatcher writes into the response (in-process, through the real dispatcher)."""

from __future__ import annotations

import asyncio
import datetime
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.index import schema_name_map
from kio.schema.list_offsets.v1.response import ListOffsetsPartitionResponse as LO1
from kio.schema.list_offsets.v8.response import ListOffsetsPartitionResponse as LO8
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i16, i32
from kwire import decode_response

from kaflite.server.authorizer import ANONYMOUS, AclOperation, ResourceType, Session
from kaflite.server.broker import Broker
from kaflite.server.config import BrokerConfig
from kaflite.server.context import RequestContext, build
from kaflite.server.dispatcher import Dispatcher
from kaflite.server.handlers import Registry


def test_build_refuses_a_name_no_version_has() -> None:
    with pytest.raises(TypeError, match="leader_epcoh"):
        build(LO8, partition_index=0, error_code=0, timestamp=-1, offset=5, leader_epcoh=7)


def test_build_drops_what_this_version_lacks_and_keeps_the_rest() -> None:
    # leader_epoch arrived in ListOffsets v4: v8 keeps it, v1 has no such field and drops it
    assert build(LO8, partition_index=0, error_code=0, timestamp=-1, offset=5, leader_epoch=7).leader_epoch == 7
    v1 = build(LO1, partition_index=0, error_code=0, timestamp=-1, offset=5, leader_epoch=7)
    assert v1.offset == 5 and not hasattr(v1, "leader_epoch")


def test_build_with_a_later_versions_field_imports_only_the_newest_version() -> None:
    """A handler fills the newest shape (CreateTopics' topic_id came with v7): answering v2 must not import
    every version's module on the event loop (~100 ms the first time, seen by the loop watchdog), only the
    newest, which Registry.warm_schemas loaded already. In a fresh interpreter, so nothing is imported yet."""
    code = """
import sys
from kio.schema.create_topics.v2.response import CreatableTopicResult
from kaflite.server.context import build
r = build(CreatableTopicResult, name="t", error_code=0, error_message=None, topic_id=None)
assert r.name == "t" and not hasattr(r, "topic_id")
print(*sorted(m.split(".")[3] for m in sys.modules if m.startswith("kio.schema.create_topics.v")
              and m.endswith(".response")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    newest = max(schema_name_map["create_topics"])
    assert sorted(out.stdout.split()) == sorted(["v2", f"v{newest}"]), out.stdout


def _frame(request: Any, corr: int) -> bytes:
    buf = io.BytesIO()
    header = HeaderV2(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(corr),
        client_id="ctx-test",
    )
    entity_writer(HeaderV2)(buf, header)
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


def test_dispatcher_gives_the_listener_session_and_applies_the_throttle(tmp_path: Path) -> None:
    config = BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path),
            "listeners": "CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENTS:PLAINTEXT",
        }
    )
    broker = Broker(config)
    seen: list[tuple[Session, bool]] = []

    async def handler(ctx: RequestContext, request: Any) -> Any:
        seen.append((ctx.session, ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)))
        ctx.throttle_time_ms = 250  # what a quota would decide
        return build(ctx.response.HeartbeatResponse, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none)

    registry = Registry()
    registry.register({12: (0, 4, handler)})
    dispatcher = Dispatcher(broker, registry, config.client_listeners[0])
    request = HeartbeatRequest(group_id="g", generation_id=i32(1), member_id="m", group_instance_id=None)
    parts = asyncio.run(dispatcher.dispatch(_frame(request, 9), "10.0.0.7", 3))
    assert parts is not None
    response = decode_response(12, 4, b"".join(bytes(p) for p in parts)[4:], 9)
    assert isinstance(response, HeartbeatResponse)
    assert response.throttle_time == datetime.timedelta(milliseconds=250)
    session, allowed = seen[0]
    assert session == Session("CLIENTS", "PLAINTEXT", ANONYMOUS, "10.0.0.7")
    assert allowed  # the allow-all authorizer


def test_the_broker_takes_a_broker_config_only(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="BrokerConfig"):
        Broker({"log.dirs": str(tmp_path)})  # type: ignore[arg-type]
