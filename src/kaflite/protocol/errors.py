"""Kafka error codes (kio's `ErrorCode`, which mirrors Kafka's `Errors` enum) and two exceptions.

Every layer that refuses something raises `KafkaError(code, message)`; the server shell turns it into
the error code of the response, so the code a client sees is decided where the rule lives.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "ProtocolError"]


class KafkaError(Exception):
    """A refusal carrying the Kafka error code to answer with and a message for humans."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name.upper()}: {message}" if message else code.name.upper())
        self.code = code
        self.message = message


class ProtocolError(Exception):
    """A request that cannot be decoded (unknown api key/version, truncated or garbled body); the
    connection that sent it is closed."""
