# Types of the compiled decoder and encoder built from _decode.c (see kaflite.spark.batches._compiled_columns).
from typing import Any

class Corrupt(ValueError): ...

def columns(
    sections: list[bytes | memoryview],
    meta: list[tuple[int, int, int, int, int]],
    start: int,
    until: int,
    want_headers: bool,
    /,
) -> tuple[Any, ...] | None: ...

# the sink's compiled encoder (see kaflite.spark.encode._encode_compiled and murmur2_array)
def records(
    order: Any,
    group_end: Any,
    key_start: Any,
    key_len: Any,
    key_data: Any,
    value_start: Any,
    value_len: Any,
    value_data: Any,
    ts: Any,
    constant_ts: bool,
    extra: bytes,
    max_batch_bytes: int,
    /,
) -> tuple[bytes, bytes, bytes, bytes, bytes] | None: ...
def murmur2(offsets: Any, data: Any, /) -> bytes: ...
