"""The one-line progress bar of ``vtb eval`` and ``vtb judge``: done/total, rate, ETA, live pass rate, errors."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Mapping, TextIO


class Progress:
    """A one-line progress bar: done/total, rate, ETA, live pass rate, errors."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.done, self.passed, self.errors = total, 0, 0, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.start = time.perf_counter()
        self._lock = threading.Lock()
        self._interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.done += 1
            if record.get("status") == "ok":
                self.passed += bool(record["score"]["passed"])
            else:
                self.errors += 1
            self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        judged = self.done - self.errors
        pass_rate = f"{100 * self.passed / judged:.1f}%" if judged else "n/a"
        width = 24
        filled = int(width * self.done / max(1, self.total))
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{elapsed:.0f}s ETA {eta:.0f}s pass {pass_rate} errors {self.errors}"
        )
        if self._interactive:
            self.stream.write(line + ("\n" if self.done >= self.total else ""))
        elif self.done >= self.total or self.done % max(1, self.total // 10) == 0:
            # Logs (CI, pipes) get a plain line about every 10% instead of hundreds of carriage returns.
            self.stream.write(line.lstrip("\r") + "\n")
        self.stream.flush()
