"""The sandbox against the attacks of issue 5: each test asserts containment AND that the next call works.

One pool (one slot, short timeouts) is shared by the whole module.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from vtb_env.sandbox import Limits, Sandbox

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(1, limits=Limits(timeout_s=2.0, memory_mb=1024, file_size_mb=8, disk_mb=32, processes=32)) as sb:
        sb.start()
        yield sb


def alive(sb: Sandbox) -> None:
    """The pool answers the next call normally and the work dir starts empty."""
    result = sb.run("import os; print(sorted(os.listdir('.')), 6 * 7)")
    assert (result.exit_code, result.stdout) == (0, "[] 42\n"), result.stderr


def slot_processes(sb: Sandbox) -> list[int]:
    """Processes still running under the slot's uid (there must be none between calls)."""
    uid = sb._slots[0].config["uid"]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except FileNotFoundError:
                continue
    return found


def test_reports_active_layers(sandbox):
    layers = " ".join(sandbox.layers)
    assert "rlimits" in layers
    if os.geteuid() == 0:  # the CI machine: every layer must be on
        for layer in ("netns", "tmpfs", "uid", "landlock", "seccomp"):
            assert layer in layers, (sandbox.layers, sandbox.notes)


def test_ordinary_python_works(sandbox):
    code = (
        "import numpy as np, cv2\nfrom PIL import Image\n"
        "class P:\n    def __init__(self, v): self.v = v\n"
        "print(sum(P(i).v for i in range(4)), round(2.5), isinstance(1, int), np.arange(3).sum(), cv2.__name__)\n"
        "import json, email.mime.text, tempfile\n"
        "print(tempfile.mkstemp()[1].startswith(os.getcwd()) if False else 'ok')"
    )
    result = sandbox.run(code)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "6 2 True 3 cv2\nok\n"


def test_exception_traceback_shows_the_line(sandbox):
    result = sandbox.run("x = 1\nraise ValueError('boom')")
    assert result.exit_code == 1
    assert 'File "<code>", line 2' in result.stderr and "ValueError: boom" in result.stderr
    assert "server.py" not in result.stderr
    alive(sandbox)


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/etc/shadow",
        "/proc/1/environ",
        "/root/.bashrc",
        os.path.join(REPO, "vtb_env", "tasks.py"),
        os.path.join(REPO, "vtb_env", "sandbox", "server.py"),
    ],
)
def test_cannot_read_host_files(sandbox, path):
    result = sandbox.run(f"print(open({path!r}, 'rb').read()[:20])")
    assert result.exit_code == 1 and result.stdout == ""
    assert "PermissionError" in result.stderr or "FileNotFoundError" in result.stderr
    alive(sandbox)


def test_environment_holds_no_secrets(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    result = sandbox.run("import os; print(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in result.stdout and "secret" not in result.stdout
    alive(sandbox)


@pytest.mark.parametrize("path", ["/tmp/vtb-escape", os.path.join(REPO, "escape.txt"), "/dev/shm/escape"])
def test_cannot_write_outside_work_dir(sandbox, path):
    result = sandbox.run(f"open({path!r}, 'w').write('x')")
    assert result.exit_code == 1 and not os.path.exists(path)
    alive(sandbox)


@pytest.fixture
def tcp_listener():
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    server.settimeout(3)
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


def _accept(server):
    try:
        return server.accept()
    except OSError:
        return None


def test_no_tcp_even_to_loopback(sandbox, tcp_listener):
    port, accepted = tcp_listener
    result = sandbox.run(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)")
    assert result.exit_code == 1 and ("PermissionError" in result.stderr or "OSError" in result.stderr)
    time.sleep(0.1)
    assert accepted == [] or accepted == [None]
    alive(sandbox)


@pytest.mark.parametrize(
    "code",
    [
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53))",
        "import socket; socket.getaddrinfo('example.com', 80)",
        "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
        "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
        "import urllib.request; urllib.request.urlopen('http://example.com', timeout=1)",
    ],
)
def test_no_udp_dns_or_raw_sockets(sandbox, code):
    assert sandbox.run(code).exit_code == 1
    alive(sandbox)


def test_no_unix_socket_to_host(sandbox, tmp_path):
    path = str(tmp_path / "host.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    os.chmod(tmp_path, 0o777)
    os.chmod(path, 0o777)
    try:
        result = sandbox.run(f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({path!r})")
        assert result.exit_code == 1
    finally:
        server.close()
    alive(sandbox)


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess; subprocess.run(['id'])",
        "import os; assert os.system('touch /tmp/vtb-pwned') == 0",
        "import os; os.execv('/bin/sh', ['sh', '-c', 'id'])",
        "import os; os.posix_spawn('/bin/id', ['id'], {})",
    ],
)
def test_no_program_execution(sandbox, code):
    result = sandbox.run(code)
    assert result.exit_code == 1 and "uid=" not in result.stdout
    assert not os.path.exists("/tmp/vtb-pwned")
    alive(sandbox)


@pytest.mark.parametrize(
    "call",
    [
        "libc.setuid(0)",
        "libc.mount(b'none', b'/mnt', b'tmpfs', 0, None)",
        "libc.unshare(0x10000000)",
        "libc.ptrace(16, 1, 0, 0)",
        "libc.syscall(272, 0x10000000)",
    ],
)
def test_ctypes_privilege_tricks_fail(sandbox, call):
    code = f"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = {call}; print(r, os.getuid())"
    result = sandbox.run(code)
    assert result.exit_code == 0, result.stderr
    value, uid = result.stdout.split()
    assert value == "-1"
    if os.geteuid() == 0:
        assert uid != "0"
    alive(sandbox)


@pytest.mark.parametrize("target", ["os.getppid()", "1", "-1"])
def test_cannot_kill_the_server_or_init(sandbox, target):
    result = sandbox.run(f"import os, signal; os.kill({target}, signal.SIGKILL)")
    assert result.exit_code in (0, 1)  # EPERM, or kill(-1) reaching no one
    alive(sandbox)


@pytest.mark.parametrize("pool", ["sandbox", "forking"])  # fork denied by seccomp; fork allowed
def test_fork_bomb_is_contained_and_reaped(pool, request):
    sandbox = request.getfixturevalue(pool)
    result = sandbox.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", timeout_s=1
    )
    assert result.timed_out or result.exit_code != 0
    assert slot_processes(sandbox) == []
    alive(sandbox)


def test_thread_bomb_is_contained(sandbox):
    code = (
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()"
    )
    result = sandbox.run(code)
    assert result.exit_code == 1 and ("can't start new thread" in result.stderr or "RuntimeError" in result.stderr)
    assert slot_processes(sandbox) == []
    alive(sandbox)


def test_huge_allocation_fails_cleanly(sandbox):
    result = sandbox.run("x = bytearray(30 * 1024**3)")
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    alive(sandbox)


def test_infinite_loop_times_out(sandbox):
    start = time.perf_counter()
    result = sandbox.run("while True: pass", timeout_s=1)
    assert result.timed_out and time.perf_counter() - start < 3
    alive(sandbox)


def test_ignoring_sigxcpu_and_sleeping_times_out(sandbox):
    code = "import signal, time; signal.signal(signal.SIGXCPU, signal.SIG_IGN); time.sleep(60)"
    start = time.perf_counter()
    result = sandbox.run(code, timeout_s=1)
    assert result.timed_out and time.perf_counter() - start < 3
    alive(sandbox)


def test_printing_a_gigabyte_is_capped(sandbox):
    result = sandbox.run("import sys\nchunk = 'x' * 2**20\nfor _ in range(1024):\n    sys.stdout.write(chunk)")
    assert result.stdout_truncated and len(result.stdout) == sandbox.limits.output_bytes
    assert result.exit_code == 1 and "File too large" in result.stderr
    alive(sandbox)


@pytest.fixture(scope="module")
def forking():
    """A pool that lets the code start processes (``allow_fork``): the leftover sweep must still get them all."""
    with Sandbox(1, limits=Limits(timeout_s=2.0, memory_mb=1024, processes=32, allow_fork=True)) as sb:
        yield sb


def test_background_daemon_is_killed(forking):
    sandbox = forking
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    try:\n        os.setsid()\n    except OSError:\n        pass\n"
        "    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n"
        "print('parent done')"
    )
    result = sandbox.run(code)
    assert result.stdout == "parent done\n" and result.leftover_processes >= 1
    assert slot_processes(sandbox) == []
    alive(sandbox)


def test_symlink_named_like_an_output_image_is_not_followed(sandbox):
    code = "import os\nos.symlink('/etc/shadow', 'transformed_image_0.png')"
    result = sandbox.run(code, collect_files=True)
    assert "transformed_image_0.png" not in result.files
    assert all(b"root:" not in data for data in result.files.values())
    alive(sandbox)


def test_disk_fill_is_bounded(sandbox):
    code = "i = 0\nwhile True:\n    open(f'fill_{i}.bin', 'wb').write(b'x' * (4 * 2**20))\n    i += 1"
    result = sandbox.run(code, collect_files=True)
    assert result.exit_code == 1 and ("No space left" in result.stderr or "File too large" in result.stderr)
    assert len(result.files) <= sandbox.limits.max_output_files
    alive(sandbox)


def test_outputs_come_back_and_inputs_do_not(sandbox):
    code = "open('new.txt', 'w').write('hello')\ndata = open('same.txt').read()\nopen('same.txt', 'w').write(data)"
    result = sandbox.run(code, {"same.txt": b"unchanged", "image_1.png": b"\x89PNG"}, collect_files=True)
    assert result.exit_code == 0, result.stderr
    assert result.files == {"new.txt": b"hello"}
    alive(sandbox)


@pytest.fixture(scope="module")
def degraded():
    """The profile of an unprivileged container: no namespaces, no uid switch; rlimits + landlock + seccomp
    (fork allowed, so the leftover sweep without a slot uid is exercised too)."""
    with Sandbox(
        1,
        limits=Limits(timeout_s=2.0, memory_mb=1024, processes=32, allow_fork=True),
        disable=("netns", "tmpfs", "uid"),
    ) as sb:
        yield sb


@pytest.mark.parametrize(
    "code, check",
    [
        ("print(open('/etc/passwd').read())", lambda r: r.exit_code == 1 and "PermissionError" in r.stderr),
        ("import socket; socket.create_connection(('127.0.0.1', 22), timeout=1)", lambda r: r.exit_code == 1),
        ("import os; print(os.system('id'))", lambda r: r.exit_code == 0 and r.stdout.strip() != "0"),
        (
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
            lambda r: r.timed_out or r.exit_code != 0,
        ),
        ("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('done')", lambda r: r.leftover_processes >= 1),
        ("x = bytearray(30 * 1024**3)", lambda r: "MemoryError" in r.stderr),
    ],
)
def test_degraded_mode_still_contains(degraded, code, check):
    assert "uid" not in " ".join(degraded.layers) and "disabled by configuration" in degraded.notes[0]
    result = degraded.run(code, timeout_s=1)
    assert check(result), (result.exit_code, result.stderr[-500:])
    assert "uid=" not in result.stdout
    assert degraded.run("print(6 * 7)").stdout == "42\n"


def test_large_files_cross_the_pipe_both_ways(sandbox):
    big = os.urandom(6 * 2**20)
    result = sandbox.run(
        "data = open('in.bin', 'rb').read()\nopen('out.bin', 'wb').write(data[::-1])",
        {"in.bin": big},
        collect_files=True,
    )
    assert result.exit_code == 0, result.stderr
    assert result.files == {"out.bin": big[::-1]}


def test_concurrent_calls_from_threads():
    with Sandbox(2, limits=Limits(timeout_s=5)) as sb:
        outputs: list[str] = []
        lock = threading.Lock()

        def work(i: int) -> None:
            out = sb.run(f"print({i} * 2)").stdout
            with lock:
                outputs.append(out)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outputs) == sorted(f"{i * 2}\n" for i in range(8))


def test_each_forked_process_gets_its_own_pool():
    from vtb_env.sandbox import shared

    sb = shared.shared_sandbox("image")
    assert sb.run("print(1)").stdout == "1\n"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # a worker made by fork, like gymnasium's AsyncVectorEnv
        try:
            mine = shared.shared_sandbox("image")
            ok = mine is not sb and mine.run("print(2)").stdout == "2\n"
            os.write(write_end, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    assert os.read(read_end, 2) == b"ok"
    assert sb.run("print(3)").stdout == "3\n"  # the parent's pool is untouched
