"""Framing between the pool and a fork server: a JSON header followed by raw byte blobs.

Only the trusted server writes replies; the model's code never touches these pipes.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

_LEN = struct.Struct("<I")


def send(stream: BinaryIO, header: dict[str, Any], blobs: list[bytes] = ()) -> None:
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header).encode()
    stream.write(_LEN.pack(len(raw)) + raw)
    for blob in blobs:
        stream.write(blob)
    stream.flush()


def receive(stream: BinaryIO) -> tuple[dict[str, Any], list[bytes]]:
    """Read one message; EOFError when the other side has gone."""
    header = json.loads(_read_exactly(stream, _LEN.unpack(_read_exactly(stream, _LEN.size))[0]))
    return header, [_read_exactly(stream, n) for n in header.pop("blobs")]


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    """Read n bytes (an unbuffered pipe may return fewer per read)."""
    chunks, missing = [], n
    while missing:
        chunk = stream.read(missing)
        if not chunk:
            raise EOFError("fork server pipe closed")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
