"""The progress bar of ``vtb eval`` and ``vtb judge`` (tqdm's): done/total, rate, ETA, live pass rate, errors."""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Any, Mapping, TextIO

from tqdm import tqdm


class _LogBar(tqdm):
    """Each redraw on a line of its own, for a log (CI, a pipe) rather than carriage returns (close ends the last)."""

    @staticmethod
    def status_printer(file: TextIO):
        drawn = itertools.count()
        return lambda line: (file.write(("\n" if next(drawn) else "") + line.rstrip()), file.flush())


class Progress:
    """Counts finished records (``passed``, ``errors``) and draws them; a log gets a line about every 10%."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True):
        stream = stream or sys.stderr
        log = not getattr(stream, "isatty", lambda: False)()
        self.done = self.passed = self.errors = 0
        self._lock = threading.Lock()
        self._bar = (_LogBar if log else tqdm)(
            total=total, file=stream, disable=not enabled, mininterval=0, miniters=-(-total // 10) if log else 1
        )

    def update(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.done += 1
            if record.get("status") == "ok":
                self.passed += bool(record["score"]["passed"])
            else:
                self.errors += 1
            judged = self.done - self.errors
            self._bar.set_postfix_str(f"pass {self.passed / judged:.1%} errors {self.errors}" if judged else "", False)
            self._bar.update()
            if self.done >= self._bar.total:
                self._bar.close()
