"""Kafka error codes (kio's `ErrorCode`, which mirrors Kafka's `Errors` enum) and two exceptions.

Every layer that refuses something raises `KafkaError(code, message)`; the server shell turns it into
the error code of the response, so the code a client sees is decided where the rule lives.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "ProtocolError", "RecordValidationError", "error_name"]


def error_name(code: int | ErrorCode) -> str:
    """Kafka's name of an error code as its tools print it (`NOT_COORDINATOR`), from an int or a kio
    ErrorCode; `ERROR <n>` for a code this kio does not know (a newer broker's)."""
    value = int(code)
    try:
        return ErrorCode(value).name.upper()
    except ValueError:
        return f"ERROR {value}"


class KafkaError(Exception):
    """A refusal carrying the Kafka error code to answer with and a message for humans."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name.upper()}: {message}" if message else code.name.upper())
        self.code = code
        self.message = message


class RecordValidationError(KafkaError):
    """A batch refused because of some of its records (KIP-467, Kafka's RecordValidationException): the
    partition's error plus, per refused record, its index in its batch and why (Produce v8+
    `record_errors`), so a client fails those records alone and the others as collateral."""

    def __init__(self, code: ErrorCode, message: str, record_errors: tuple[tuple[int, str | None], ...]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


class ProtocolError(Exception):
    """A request that cannot be decoded (unknown api key/version, truncated or garbled body); the
    connection that sent it is closed."""
