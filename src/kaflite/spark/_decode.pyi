# Types of the compiled decoder built from _decode.c (see kaflite.spark.batches._compiled_columns).
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
