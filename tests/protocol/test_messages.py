import io

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer

from kaflite.protocol.messages import (
    ProtocolError,
    RequestHeader,
    decode_request,
    encode_response,
    parse_request_header,
    response_header_bytes,
)


def _encode(header_cls: type, body: object, api_key: int, version: int, corr: int = 42) -> bytes:
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf, header_cls(request_api_key=api_key, request_api_version=version, correlation_id=corr, client_id="cli")
    )
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def test_flexible_header_and_body_with_leftover_bytes() -> None:
    body = MetadataV12(
        topics=(MetadataRequestTopic(topic_id=None, name="a"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    frame = _encode(HeaderV2, body, 3, 12) + b"\x00\x00\x00"  # librdkafka's three trailing bytes
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 12, 42, "cli")
    assert decode_request(header, frame, offset) == body


def test_legacy_header() -> None:
    body = MetadataV1(topics=None)
    frame = _encode(HeaderV1, body, 3, 1, corr=-5)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 1, -5, "cli")
    assert decode_request(header, frame, offset) == body


def test_unknown_tagged_fields_in_header_are_skipped() -> None:
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    buf = io.BytesIO()
    entity_writer(HeaderV1)(
        buf, HeaderV1(request_api_key=18, request_api_version=3, correlation_id=1, client_id=None)
    )
    # one tagged field: tag 7, 3 bytes of payload
    frame = buf.getvalue() + b"\x01\x07\x03abc"
    entity_writer(ApiVersionsRequest)(b := io.BytesIO(), body)
    frame += b.getvalue()
    header, offset = parse_request_header(frame)
    assert header.client_id is None
    assert decode_request(header, frame, offset) == body


def test_truncated_body_is_a_protocol_error() -> None:
    body = MetadataV12(
        topics=(MetadataRequestTopic(topic_id=None, name="abcdef"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    frame = _encode(HeaderV2, body, 3, 12)[:-6]
    header, offset = parse_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_request(header, frame, offset)


def test_short_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_request_header(b"\x00\x03\x00")


def test_response_headers() -> None:
    assert response_header_bytes(18, 3, 9) == b"\x00\x00\x00\x09"  # ApiVersions: always header v0
    assert response_header_bytes(3, 9, 9) == b"\x00\x00\x00\x09\x00"  # flexible: header v1
    assert response_header_bytes(3, 8, 9) == b"\x00\x00\x00\x09"
    parts = encode_response(3, 8, 9, _metadata_v8_response())
    total = b"".join(parts)
    assert int.from_bytes(total[:4], "big") == len(total) - 4


def _metadata_v8_response() -> object:
    import datetime

    from kio.schema.metadata.v8.response import MetadataResponse

    return MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=0, topics=()
    )
