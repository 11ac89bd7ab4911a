"""Which image bytes are *plain*: a PNG or JPEG whose decoding costs work proportional to its pixels.

Decoding work is not bounded by pixels or bytes in general: a progressive JPEG decodes every scan
over the whole picture, so an 81 KB file of 16 Mpx whose last scan is repeated 600 times took 14 s;
Pillow walks PNG chunks and JPEG markers one by one in Python; TIFF, GIF, WebP and APNG add pages,
frames, strips and tiles. ``plain_form`` reads only the container structure (no pixel is decoded,
and its own walk is capped) and says whether the bytes belong to the closed set whose decode work is
bounded by ``pixels * passes``:

- PNG: 8 bits per sample, grey, RGB or RGBA (the shown modes), one frame (no ``acTL``), not
  interlaced (Adam7 decodes 6 times slower in Pillow), at most ``MAX_PNG_CHUNKS`` chunks;
- JPEG: Huffman-coded baseline, extended or progressive (SOF0/1/2), 8-bit, 1, 3 or 4 components, at
  most ``MAX_JPEG_SEGMENTS`` marker segments before the first scan, no junk between them, and at most
  ``MAX_JPEG_SCANS`` scans (libjpeg's progressive scripts use 6 to 10).

Anything else (arithmetic or lossless JPEG, GIF, TIFF, WebP, BMP, animations, a PNG with a palette
or 16-bit samples) is decoded only inside a sandbox call, under its time and memory limits
(``vtb_env.sandbox.normalize``), and what comes out of it is re-encoded as a plain PNG. This module runs in
the fork server and in the environment alike: the standard library only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

MAX_PNG_CHUNKS = 16_384  # libpng writes 8 KiB IDAT chunks: a 32 MiB file is 4,096 of them
MAX_JPEG_SEGMENTS = 256  # marker segments before the first scan (tables, APPn, comments)
MAX_JPEG_SCANS = 16
MAX_JPEG_FILL = 16  # 0xFF fill bytes before one marker
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_MODES = {0: "L", 2: "RGB", 6: "RGBA"}  # colour type -> mode, at 8 bits per sample
_JPEG_MODES = {1: "L", 3: "RGB", 4: "CMYK"}
_JPEG_HUFFMAN_FRAMES = {0xC0, 0xC1, 0xC2}  # baseline, extended sequential, progressive
_JPEG_OTHER_FRAMES = {0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}  # lossless, hierarchical, arithmetic
_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM, RSTn: no length field
_NOT_A_SEGMENT = {0x00, 0xD8, 0xD9}  # a stuffed byte, a second SOI, EOI before any scan


@dataclass(frozen=True)
class PlainForm:
    """What the structure says: format, size, mode, and the decoder's passes over the pixels."""

    format: str  # "PNG" or "JPEG"
    width: int
    height: int
    mode: str
    passes: int  # 1 for a PNG, the scan count for a JPEG

    @property
    def pixels(self) -> int:
        return self.width * self.height


def plain_form(data: bytes) -> PlainForm | None:
    """The plain form of ``data``, or None when its decode work is not bounded by its pixels (module doc).
    Never raises; costs at most a capped walk over the container."""
    try:
        if data.startswith(PNG_SIGNATURE):
            return _png(data)
        if data.startswith(b"\xff\xd8"):
            return _jpeg(data)
    except (struct.error, IndexError):
        pass
    return None


def _png(data: bytes) -> PlainForm | None:
    position, chunks, form, seen_data = len(PNG_SIGNATURE), 0, None, False
    while position + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        end = position + 12 + length
        chunks += 1
        if end > len(data) or chunks > MAX_PNG_CHUNKS:
            return None
        if chunks == 1:
            if kind != b"IHDR" or length != 13:
                return None
            width, height, depth, colour, _, _, interlace = struct.unpack_from(">IIBBBBB", data, position + 8)
            if depth != 8 or colour not in _PNG_MODES or interlace != 0 or not width or not height:
                return None
            form = PlainForm("PNG", width, height, _PNG_MODES[colour], 1)
        elif kind == b"acTL":
            return None  # an animation
        elif kind == b"IDAT":
            seen_data = True
        elif kind == b"IEND":
            return form if seen_data else None
        position = end
    return None  # cut short: no IEND


def _jpeg(data: bytes) -> PlainForm | None:
    position, segments, form, frame, components = 2, 0, None, 0, 0
    while True:
        if data[position] != 0xFF:
            return None  # junk between segments: Pillow would step over it byte by byte
        fill = position + 1
        while data[fill] == 0xFF:  # fill bytes before a marker, each one a step of Pillow's loop
            fill += 1
            if fill - position > MAX_JPEG_FILL:
                return None
        marker, position = data[fill], fill + 1
        if marker in _STANDALONE:
            continue
        segments += 1
        if segments > MAX_JPEG_SEGMENTS or marker in _NOT_A_SEGMENT or marker in _JPEG_OTHER_FRAMES:
            return None
        (length,) = struct.unpack_from(">H", data, position)
        if length < 2 or position + length > len(data):
            return None
        if marker in _JPEG_HUFFMAN_FRAMES:
            precision, height, width, components = struct.unpack_from(">BHHB", data, position + 2)
            if form is not None or precision != 8 or components not in _JPEG_MODES or not width or not height:
                return None  # a second frame, 12-bit samples, odd components, a height given later (DNL)
            form, frame = PlainForm("JPEG", width, height, _JPEG_MODES[components], 0), marker
        elif marker == 0xDA:  # the first scan: entropy-coded data and the later scans follow
            if form is None:
                return None
            scans = data.count(b"\xff\xda", position - 2)  # entropy-coded data never holds FF DA
            limit = MAX_JPEG_SCANS if frame == 0xC2 else components  # sequential: one scan per component at most
            return replace(form, passes=scans) if scans <= limit else None
        position += length
