"""Which input files a call read, as the kernel saw it: inotify watches held by the fork server.

The server watches each input file (``IN_ACCESS``) before the child runs and reads the events after
it is gone. The descriptor lives in the server only (the child closes every inherited descriptor), and
the kernel queues an event only when a process reads the file's bytes, so model code can neither
write an event nor produce one without reading the image. A read through an ``mmap`` raises no event:
such a call is counted as not having read (what is reported errs toward "not read").
"""

from __future__ import annotations

import os
import struct

from vtb_env.sandbox import _libc

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, name length


class ReadWatch:
    """Watches for one call at a time; ``start`` before the child runs, ``read_names`` after."""

    def __init__(self) -> None:
        self.fd = _libc.inotify_init()  # raises OSError where inotify is unavailable
        self._names: dict[int, str] = {}

    def start(self, paths: dict[str, str]) -> None:
        """Watch ``{name: path}``; events of an earlier call are dropped."""
        self._drain()
        self._names = {_libc.inotify_add_watch(self.fd, path, _libc.IN_ACCESS): name for name, path in paths.items()}

    def read_names(self) -> list[str]:
        """The watched names read since ``start`` (sorted); the watches end (the next ``start`` makes new ones)."""
        read = {self._names[wd] for wd, mask in self._drain() if mask & _libc.IN_ACCESS and wd in self._names}
        self._names = {}
        return sorted(read)

    def _drain(self) -> list[tuple[int, int]]:
        events = []
        while True:
            try:
                buffer = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return events
            offset = 0
            while offset + _EVENT.size <= len(buffer):
                wd, mask, _, length = _EVENT.unpack_from(buffer, offset)
                events.append((wd, mask))
                offset += _EVENT.size + length

    def close(self) -> None:
        os.close(self.fd)
