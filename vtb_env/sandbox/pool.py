"""The pool: fork-server slots behind a thread-safe ``Sandbox.run``.

Each slot is one fork server (``boot.py`` starts it, ``server.py`` serves it), spoken to over ``protocol``;
a slot whose server failed is replaced on its next call. This process's shared pools, one per profile,
are ``vtb_env.sandbox.shared``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from typing import BinaryIO, Mapping, Sequence

from vtb_env.sandbox import cleanup, identity, protocol
from vtb_env.sandbox.boot import BOOT_SCRIPT, clean_environment, project_dirs
from vtb_env.sandbox.isolation import OPTIONAL_LAYERS, SHARED_WORK_DIR
from vtb_env.sandbox.limits import Limits
from vtb_env.sandbox.normalize import CheckedImage, ImageRequest
from vtb_env.sandbox.server import CODE_WORK_DIR

IMAGE_MODULES = ("numpy", "PIL.Image", "PIL.ImageEnhance", "PIL.ImageFilter", "PIL.ImageOps", "PIL.ImageDraw", "cv2")

STDERR_TAIL_LINES = 20  # of the server's stderr, quoted when it fails to start or dies


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the model's code)."""


@dataclass
class ExecResult:
    """The outcome of one run of untrusted code."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration_s: float
    files: dict[str, bytes] = field(default_factory=dict)  # new or changed files, by name, sorted
    skipped_files: list[str] = field(default_factory=list)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    leftover_processes: int = 0
    # With ``images=``: the image files the code wrote, checked and made plain (``normalize``), in the request's
    # order, and the input files the code read (the kernel's record; None where inotify is unavailable).
    images: list[CheckedImage] = field(default_factory=list)
    read_inputs: list[str] | None = None

    @property
    def setup_failed(self) -> bool:
        return self.exit_code == 125


class _Slot:
    """One fork-server process and its pipes; replaced by a fresh one after any server failure."""

    def __init__(self, index: int, config: dict):
        self.index = index
        self.config = dict(config)
        self.uid_claim: identity.UidClaim | None = None
        self.process: subprocess.Popen | None = None
        self.stderr: BinaryIO | None = None  # an unlinked file: the server's stderr, quoted on failures
        self.hello: dict = {}

    def ensure_started(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        if self.process is not None:
            self.kill()
        self._claim_uid()
        self.stderr = tempfile.TemporaryFile(prefix="vtb-server-stderr-")
        self.process = subprocess.Popen(
            # -S: no .pth files run (an editable install's finder would map the project's names to its sources);
            # PYTHONPATH already lists the directories they add. -P: the script's own dir is not on sys.path.
            [sys.executable, "-S", "-P", BOOT_SCRIPT, json.dumps(self.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=clean_environment(),
            cwd="/",
            close_fds=True,
        )
        try:
            self.hello, _ = protocol.receive(self.process.stdout)
        except EOFError:
            tail = self.stderr_tail()
            self.kill()
            raise SandboxError(
                "the fork server failed to start"
                + (f"; its stderr ends with:\n{tail}" if tail else " (it wrote nothing to stderr)")
            ) from None

    def _claim_uid(self) -> None:
        """Reserve this slot's uid once (root only): checked against passwd, subuid/subgid and running processes."""
        if self.uid_claim is not None or os.geteuid() != 0 or "uid" in self.config["disable"]:
            return
        try:
            self.uid_claim = identity.claim_slot_uid(os.getpid() * 16 + self.index)
            self.config["uid"] = self.uid_claim.uid
        except OSError:
            self.config["uid"] = None  # the server reports the uid layer as missing

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(max(0, os.fstat(self.stderr.fileno()).st_size - 8192))
        lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def call(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        self.ensure_started()
        try:
            protocol.send(self.process.stdin, header, blobs)
            reply = protocol.receive(self.process.stdout)
        except (EOFError, BrokenPipeError, OSError) as exc:
            tail = self.stderr_tail()
            self.kill()  # restarted on the next call
            raise SandboxError(
                f"the fork server died: {exc}" + (f"; its stderr ends with:\n{tail}" if tail else "")
            ) from None
        if reply[0].get("restart"):
            self.kill()  # a cleanup or server failure: the next call gets a fresh server
        return reply

    def stop(self, grace_s: float = 1.0) -> None:
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=grace_s)
                self.process.stdout.close()
                self.stderr.close()
                self.process = None
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.release_uid()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout, self.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            self.process = None
            work_dir = self.hello.get("work_dir")
            if work_dir and work_dir != SHARED_WORK_DIR:  # a host-disk work dir outlives the killed server
                try:
                    cleanup.remove_tree(work_dir)
                except OSError:
                    pass

    def release_uid(self) -> None:
        if self.uid_claim is not None:
            self.uid_claim.release()
            self.uid_claim = None

    def forget(self) -> None:
        """In a forked child: drop the inherited pipes without touching the parent's server."""
        if self.process is not None:
            for stream in (self.process.stdin, self.process.stdout, self.stderr):
                try:
                    os.close(stream.fileno())
                except OSError:
                    pass
            self.process = None
        if self.uid_claim is not None:
            self.uid_claim.release()  # our copy of the lock fd only: the parent's claim holds
            self.uid_claim = None


class Sandbox:
    """A pool of fork servers. ``run`` is thread-safe; a call waits for a free slot.

    ``slots`` defaults to the cores this process may run on (``os.sched_getaffinity``).

    ``disable`` turns optional layers off (to debug, or to check the degraded mode of hosts
    that refuse them); rlimits are always on.
    """

    def __init__(
        self,
        slots: int | None = None,
        *,
        preload: tuple[str, ...] = IMAGE_MODULES,
        limits: Limits = Limits(),
        png_compress_level: int | None = 1,
        disable: tuple[str, ...] = (),
    ):
        self.limits = limits
        count = slots or default_slot_count()
        unknown = set(disable) - set(OPTIONAL_LAYERS)
        if unknown:
            raise ValueError(f"unknown layers {sorted(unknown)}; optional layers: {', '.join(OPTIONAL_LAYERS)}")
        config = {
            "preload": list(preload),
            "limits": asdict(limits),
            "png_compress_level": png_compress_level,
            "disable": list(disable),
            "uid": None,
            "hide": project_dirs(),
        }
        self._slots = [_Slot(i, config) for i in range(count)]
        self._free: queue.Queue[_Slot] = queue.Queue()
        for slot in self._slots:
            self._free.put(slot)
        self._start_lock = threading.Lock()
        self._closed = False

    @property
    def slots(self) -> int:
        return len(self._slots)

    def start(self) -> "Sandbox":
        """Start every slot now (in parallel) instead of on first use."""
        with self._start_lock:
            threads = [threading.Thread(target=s.ensure_started) for s in self._slots]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return self

    work_dir = CODE_WORK_DIR  # the work dir as the code is told about it: a constant, no server started

    @property
    def started_slots(self) -> int:
        """How many slots have a server running now (slots start on first use or with ``start``)."""
        return sum(slot.process is not None for slot in self._slots)

    @property
    def layers(self) -> list[str]:
        """The isolation layers active in the slots (starts one slot if none is running)."""
        return list(self._info()["layers"])

    @property
    def notes(self) -> list[str]:
        """Why a layer is missing or degraded on this host."""
        return list(self._info()["notes"])

    def _info(self) -> dict:
        """What a started slot reported; never waits behind running calls once one slot has started."""
        for slot in self._slots:
            if slot.hello:
                return slot.hello
        slot = self._free.get()
        try:
            slot.ensure_started()
            return slot.hello
        finally:
            self._free.put(slot)

    def run(
        self,
        code: str,
        files: Mapping[str, bytes] = {},
        *,
        timeout_s: float | None = None,
        collect_files: bool = False,
        images: ImageRequest | None = None,
    ) -> ExecResult:
        """Run ``code`` in a fresh isolated child with ``files`` in its work dir.

        ``images``: the files it writes that are images come back checked and plain (``ExecResult.images``,
        decoded in a second child within the call's ``timeout_s``), with the inputs it read (``read_inputs``)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        bad = [name for name in files if not name or "/" in name or name.startswith(".")]
        if bad:
            raise ValueError(f"bad input file names {bad!r}: plain names only, not hidden")
        header = {
            "code": code,
            "files": list(files),
            "timeout_s": timeout_s or self.limits.timeout_s,
            "collect_files": collect_files,
            "images": None if images is None else asdict(images),
        }
        reply, blobs = self._call(header, list(files.values()))
        stdout, stderr, *outputs = blobs
        checked = _checked_images(reply.get("images") or [], outputs[len(reply["files"]) :])
        return ExecResult(
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            exit_code=reply["exit_code"],
            timed_out=reply["timed_out"],
            duration_s=reply["duration_s"],
            files=dict(zip(reply["files"], outputs[: len(reply["files"])], strict=True)),
            skipped_files=reply["skipped_files"],
            stdout_truncated=reply["stdout_size"] > len(stdout),
            stderr_truncated=reply["stderr_size"] > len(stderr),
            leftover_processes=reply["leftover_processes"],
            images=checked,
            read_inputs=reply.get("read_inputs"),
        )

    def normalize(
        self, images: Sequence[tuple[str, bytes]], request: ImageRequest, *, timeout_s: float | None = None
    ) -> list[CheckedImage]:
        """Check ``images`` (name, bytes) as a call's outputs are checked (``vtb_env.sandbox.normalize``): decoded
        in an isolated child within ``timeout_s``, never in this process; the results in the given order."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        header = {
            "check": True,
            "names": [name for name, _ in images],
            "images": asdict(request),
            "timeout_s": timeout_s or self.limits.timeout_s,
        }
        reply, blobs = self._call(header, [data for _, data in images])
        return _checked_images(reply["images"], blobs)

    def _call(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        slot = self._free.get()
        try:
            reply = slot.call(header, blobs)
        finally:
            self._free.put(slot)
        if "error" in reply[0]:
            raise SandboxError(reply[0]["error"])
        return reply

    def close(self) -> None:
        self._closed = True
        for slot in self._slots:
            slot.stop()

    def forget(self) -> None:
        """In a forked child: drop the inherited slots without touching the parent's servers."""
        for slot in self._slots:
            slot.forget()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checked_images(headers: list[dict], blobs: Sequence[bytes]) -> list[CheckedImage]:
    return [
        CheckedImage(h["name"], data, tuple(h["notes"]), h["refusal"], h["copy_of"])
        for h, data in zip(headers, blobs, strict=True)
    ]


def default_slot_count() -> int:
    """One slot per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
