"""kaflite.protocol.errors.error_name: the name Kafka's tools print for an error code."""

from __future__ import annotations

from kaflite.protocol.errors import ErrorCode, error_name


def test_a_known_code_is_named_as_kafkas_tools_name_it() -> None:
    assert error_name(16) == "NOT_COORDINATOR"
    assert error_name(ErrorCode.group_id_not_found) == "GROUP_ID_NOT_FOUND"
    assert error_name(0) == "NONE"


def test_a_code_this_kio_does_not_know_is_still_answered_with_its_number() -> None:
    assert error_name(9999) == "ERROR 9999"
