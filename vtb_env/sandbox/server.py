"""The fork server: one per slot, started by the pool with a clean environment.

It imports the heavy libraries once, sets up every isolation layer the host allows, then forks
a *zygote* before it reads any request. For each request the server writes the input files into
the work dir and the code into an unlinked file, and asks the zygote (over a socketpair, with
nothing but the timeout) to fork a child. The child isolates itself, reads its code and runs it;
the zygote waits with a wall-clock timeout, kills and reaps everything the call left behind (it
is the child subreaper) and reports the exit status. The server then sends back capped output and
the files the code wrote, and empties the work dir. The zygote never touches request data, so a
child that walks its stack or the heap finds nothing of any earlier call. The layers are set up in
``isolation.py``, the zygote and its children are ``zygote.py``, the sweep after a call ``reaping.py``.
A call that returns images (``"images"`` in the request: the vision tool) also learns which input
files the code read (``reads.py``: the kernel's inotify events, seen only by the server) and has its
image files checked in a second, fresh child (``normalize.py``) before anything goes back; a
``"check"`` request checks images without running code.

Started through ``vtb_env/sandbox/boot.py`` (never ``python -m``: see there why), with a JSON config;
talks over stdin/stdout. Nothing of the project's task code is in the server: not imported (boot.py),
not on its ``PYTHONPATH`` (the pool), not readable by a child (``hide``: the project's package
directories are left out of the landlock ruleset and, where the server may mount, covered by an
empty read-only tmpfs).
"""

from __future__ import annotations

import importlib
import json
import os
import stat
import sys
import tempfile
from typing import Any

from vtb_env.sandbox import cleanup, normalize, protocol
from vtb_env.sandbox import limits as limits_mod
from vtb_env.sandbox.isolation import SHARED_WORK_DIR, setup
from vtb_env.sandbox.limits import Limits, MiB
from vtb_env.sandbox.normalize import CheckedImage, ImageRequest
from vtb_env.sandbox.reads import ReadWatch
from vtb_env.sandbox.zygote import Zygote

# The work dir as the code is told about it. Code runs with its work dir as the current directory:
# a private tmpfs at SHARED_WORK_DIR where the server may mount one, a host-disk directory where it
# may not. Only the relative path is true on every host and in every slot, and it is known without
# starting a server.
CODE_WORK_DIR = "."


def preload(modules: list[str], png_compress_level: int | None) -> None:
    for name in modules:
        importlib.import_module(name)
    if "cv2" in sys.modules:
        sys.modules["cv2"].setNumThreads(1)
    if png_compress_level is not None and "PIL.Image" in sys.modules:
        _default_png_compression(png_compress_level)


def _default_png_compression(level: int) -> None:
    """PNG encoding dominates an image job: make ``compress_level`` default to a faster level."""
    from PIL import Image, PngImagePlugin

    Image.init()

    def save(im: Any, fp: Any, filename: Any, chunk: Any = PngImagePlugin.putchunk, save_all: bool = False) -> None:
        if "optimize" not in im.encoderinfo:
            im.encoderinfo.setdefault("compress_level", level)
        PngImagePlugin._save(im, fp, filename, chunk, save_all)

    Image.register_save("PNG", save)


class Server:
    """Reads requests, prepares and collects the work dir; asks the zygote for each child."""

    def __init__(self, config: dict[str, Any]):
        self.limits = Limits(**config.get("limits", {}))
        self.proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
        self.proto_out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.close(null)
        preload(config.get("preload", []), config.get("png_compress_level"))
        self.iso = setup(
            config.get("uid"), self.limits, frozenset(config.get("disable", ())), tuple(config.get("hide", ()))
        )
        # unlinked files outside the tmpfs: output survives a full disk; the code reaches the child without the
        # zygote reading it
        self.captures = [tempfile.TemporaryFile(prefix="vtb-capture-") for _ in range(2)]
        self.code_file = tempfile.TemporaryFile(prefix="vtb-code-")
        self.zygote = Zygote(
            self.iso,
            self.limits,
            [f.fileno() for f in self.captures],
            self.code_file.fileno(),
            close_in_zygote=[self.proto_in.fileno(), self.proto_out.fileno()],
        )
        self.reads: ReadWatch | None = None
        try:
            self.reads = ReadWatch()  # after the zygote: no child can inherit it
            self.iso.layers.append("reads(inotify)")
        except OSError as exc:
            self.iso.notes.append(f"inotify unavailable ({exc}): a call's reads of its inputs are not seen")

    def serve(self) -> None:
        protocol.send(
            self.proto_out, {"layers": self.iso.layers, "notes": self.iso.notes, "work_dir": self.iso.work_dir}
        )
        while True:
            try:
                request, blobs = protocol.receive(self.proto_in)
            except EOFError:
                break
            try:
                header, out_blobs = self.check(request, blobs) if request.get("check") else self.run(request, blobs)
            except Exception as exc:  # report, and have the pool replace this server: its state is unknown
                header, out_blobs = {"error": f"{type(exc).__name__}: {exc}", "restart": True}, []
            protocol.send(self.proto_out, header, out_blobs)
        self._clear_work_dir()
        if self.iso.work_dir != SHARED_WORK_DIR:  # the tmpfs vanishes with our mount namespace anyway
            os.rmdir(self.iso.work_dir)

    def run(self, request: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        timeout = float(request.get("timeout_s") or self.limits.timeout_s)
        images = ImageRequest.from_json(request["images"]) if request.get("images") else None
        inputs = self._prepare(request["files"], blobs)
        watching = images is not None and self.reads is not None
        if watching:
            self.reads.start({name: os.path.join(self.iso.work_dir, name) for name in inputs})
        self._reset_files()
        self.code_file.write(request["code"].encode("utf-8", "surrogatepass"))
        self.code_file.flush()
        exit_code, timed_out, duration, leftovers = self.zygote.spawn(timeout)
        read_inputs = self.reads.read_names() if watching else None  # before the server reads any file itself
        (stdout, out_size), (stderr, err_size) = (self._read_capture(c) for c in self.captures)
        collect = request.get("collect_files") or images is not None
        names, files, skipped = self._collect(inputs) if collect else ([], [], [])
        checked: list[CheckedImage] = []
        if images is not None:
            by_name = dict(zip(names, files, strict=True))
            chosen = images.select(names)
            originals = {name: entry[3] for name, entry in inputs.items()}
            checked = self._check_images(images, [(n, by_name[n]) for n in chosen], originals, timeout - duration)
            names = [name for name in names if name not in chosen]
            files = [by_name[name] for name in names]
        header = {
            "exit_code": exit_code,
            "timed_out": timed_out,
            "duration_s": duration,
            "stdout_size": out_size,
            "stderr_size": err_size,
            "files": names,
            "skipped_files": skipped,
            "leftover_processes": leftovers,
        }
        if images is not None:
            header["read_inputs"] = read_inputs
            header["images"] = [_image_header(image) for image in checked]
        try:
            self._clear_work_dir()  # nothing of this call waits in the work dir for the next one
        except OSError as exc:
            header["restart"] = f"work dir cleanup failed: {type(exc).__name__}: {exc}"
        return header, [stdout, stderr, *files, *(image.data for image in checked)]

    def check(self, request: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """Check images without running code (``Sandbox.normalize``)."""
        images = ImageRequest.from_json(request["images"])
        checked = self._check_images(images, list(zip(request["names"], blobs, strict=True)), {}, request["timeout_s"])
        return {"images": [_image_header(image) for image in checked]}, [image.data for image in checked]

    # -- checking images -------------------------------------------------------------------
    def _check_images(
        self, request: ImageRequest, images: list[tuple[str, bytes]], inputs: dict[str, bytes], time_left: float
    ) -> list[CheckedImage]:
        """``images`` checked in a fresh child (``normalize``) with ``time_left`` (at least MIN_CHECK_S)."""
        if not images:
            return []
        self._reset_files()
        normalize.write_request(self.code_file, request, images, inputs)
        # a PNG of the call's pixels (4 bytes each at most) and the framing, with room to spare
        cap = 4 * request.max_call_pixels + (len(images) + 1) * MiB
        exit_code, timed_out, _, _ = self.zygote.spawn(max(time_left, normalize.MIN_CHECK_S), cap)
        self.captures[0].seek(0)
        results = self.captures[0].read()
        stderr = self._read_capture(self.captures[1])[0].decode("utf-8", "replace")
        unfinished = normalize.unfinished_reason(timed_out, exit_code, stderr)
        return normalize.read_results(results, [name for name, _ in images], unfinished)

    def _reset_files(self) -> None:
        for f in (*self.captures, self.code_file):
            f.seek(0)
            f.truncate()

    # -- before the call -------------------------------------------------------------------
    def _prepare(self, names: list[str], blobs: list[bytes]) -> dict[str, tuple[int, int, int, bytes]]:
        self._clear_work_dir()
        inputs = {}
        for name, data in zip(names, blobs, strict=False):
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"bad input file name {name!r}")
            path = os.path.join(self.iso.work_dir, name)
            with open(path, "wb") as f:
                f.write(data)
            if self.iso.uid is not None:
                os.chown(path, self.iso.uid, self.iso.uid)
            st = os.stat(path)
            inputs[name] = (st.st_ino, st.st_mtime_ns, st.st_size, data)
        return inputs

    def _clear_work_dir(self) -> None:
        cleanup.clear_directory(self.iso.work_dir)

    # -- after the call ----------------------------------------------------------------------
    def _read_capture(self, capture: Any) -> tuple[bytes, int]:
        size = os.fstat(capture.fileno()).st_size
        capture.seek(0)
        return capture.read(self.limits.output_bytes), size

    def _collect(self, inputs: dict[str, tuple[int, int, int, bytes]]) -> tuple[list[str], list[bytes], list[str]]:
        """New or changed regular files at the top of the work dir: never following links, capped."""
        names, files, skipped = [], [], []
        dir_fd = os.open(self.iso.work_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in sorted(os.listdir(dir_fd)):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
                except OSError as exc:
                    skipped.append(f"{name}: {exc.strerror}")
                    continue
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # directories, fifos, hard links
                    os.close(fd)
                    skipped.append(f"{name}: not a regular file")
                    continue
                with os.fdopen(fd, "rb") as f:
                    if st.st_size > self.limits.max_output_file_bytes:
                        skipped.append(f"{name}: larger than {self.limits.max_output_file_bytes} bytes")
                        continue
                    before = inputs.get(name)
                    if before and before[:3] == (st.st_ino, st.st_mtime_ns, st.st_size):
                        continue
                    data = f.read(self.limits.max_output_file_bytes + 1)
                if before and data == before[3]:
                    continue
                if len(names) == self.limits.max_output_files:
                    skipped.append(f"{name}: more than {self.limits.max_output_files} output files")
                    continue
                names.append(name)
                files.append(data)
        finally:
            os.close(dir_fd)
        return names, files, limits_mod.capped_listing(skipped)


def _image_header(image: CheckedImage) -> dict[str, Any]:
    return {"name": image.name, "notes": list(image.notes), "refusal": image.refusal, "copy_of": image.copy_of}


def main() -> None:
    Server(json.loads(sys.argv[1])).serve()
