"""Every user error of ``vtb serve``, ``vtb info`` and ``vtb eval``'s numbers is one line with its documented
exit code, before anything slow runs (issue 32, item 4).

Before: ``vtb serve --port 99999`` printed two tracebacks; a busy port or a bad host exited 3 ("missing
extra") with no ``error:`` line; seven argument mistakes exited 70 ("internal error"); ``eval --samples 0``
exited 0 having done nothing and ``--concurrency 0`` was silently replaced; ``--ray-address
127.0.0.1:1`` hung for minutes; a missing ``fastapi`` said ``pip install fastapi``; argparse's own
mistakes printed its usage block (table: docs/results/evaluation.md).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.support.cli import one_error_line
from tests.support.menu_tasks import ROOT
from vtb_app import cli
from vtb_app.commands import serve as serve_command
from vtb_app.errors import ExitCode


def run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main([str(arg) for arg in argv])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def busy_port():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


USAGE_ERRORS = [
    (["serve", "--port", "99999"], "argument --port: expected an integer from 0 to 65535, got '99999'"),
    (["serve", "--port", "{busy}"], "cannot listen on 127.0.0.1:{busy}: the port is in use"),
    (["serve", "--host", "no.such.host.invalid"], "cannot resolve host 'no.such.host.invalid'"),
    (["serve", "--host", "203.0.113.7", "--port", "0"], "no network interface of this machine has that address"),
    (["serve", "--host", "0.0.0.0", "--port", "0"], "0.0.0.0 is reachable from other machines"),
    (["serve", "--max-sessions", "0"], "argument --max-sessions: expected an integer from 1 to 4096, got '0'"),
    (["serve", "--session-timeout", "-5"], "argument --session-timeout: expected a number from 0.1 to 604800"),
    (["serve", "--session-timeout", "nan"], "argument --session-timeout: expected a number from 0.1 to 604800"),
    (["serve", "--session-timeout", "inf"], "argument --session-timeout: expected a number from 0.1 to 604800"),
    (["serve", "--max-request-bytes", "10"], "argument --max-request-bytes: expected an integer from 1024"),
    (["serve", "--max-connections", "1e3"], "argument --max-connections: expected an integer from 4 to 65536"),
    (["serve", "--tasks", "synth:0:1", "--port", "0"], "--tasks 'synth:0:1' holds no task"),
    (["info", "synth:99999999999999999999:1"], "with 0 <= N <= 1,000,000,000"),
    (["info", "synth:1:-5"], "0 <= SEED < 10**40"),
    (["eval", "--max-dialogue-images", "-1", "--out", "{tmp}/e"], "argument --max-dialogue-images: expected an integ"),
    (["eval", "--samples", "0", "--out", "{tmp}/e"], "argument --samples: expected an integer from 1 to 10000"),
    (["eval", "--concurrency", "0", "--out", "{tmp}/e"], "argument --concurrency: expected an integer from 1 to"),
    (["eval", "--limit", "-1", "--out", "{tmp}/e"], "argument --limit: expected an integer of at least 0"),
    (["eval", "--preset", "nope", "--out", "{tmp}/e"], "argument --preset: invalid choice: 'nope'"),
    (["eval"], "the following arguments are required: --out"),
]


@pytest.mark.parametrize(("argv", "says"), USAGE_ERRORS, ids=[" ".join(a[:3]) for a, _ in USAGE_ERRORS])
def test_usage_errors_are_one_line_exit_2_before_anything_runs(tmp_path, capsys, busy_port, argv, says):
    if argv[0] == "serve" and not says.startswith("argument "):
        # past its arguments `vtb serve` needs its extra first (a missing one exits 3): the py312 stage has it
        pytest.importorskip("openenv", reason="openenv is the `serve` extra (scripts/test_py312.sh runs these)")
    fill = {"busy": busy_port, "tmp": tmp_path}
    start = time.monotonic()
    code, err = run(capsys, *(arg.format(**fill) for arg in argv))
    assert code == ExitCode.USAGE and says.format(**fill) in one_error_line(err), err
    assert time.monotonic() - start < 60 and not (tmp_path / "e").exists()  # no run was started


def test_an_unreachable_ray_address_exits_6_at_once(tmp_path, capsys):
    pytest.importorskip("ray")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nobody listens once the probe is closed
    start = time.monotonic()
    code, err = run(capsys, "eval", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--out", tmp_path / "e")
    assert code == ExitCode.UNREACHABLE and time.monotonic() - start < 30
    assert f"the Ray cluster at 127.0.0.1:{port} cannot be reached: Connection refused" in one_error_line(err)


def _serve_without_fastapi(tmp_path, verifiers_installed: bool) -> str:
    """`vtb serve`'s one error line in a fresh interpreter where fastapi cannot be imported, with or without a
    ``verifiers`` package beside it (a stand-in module on the path, or none at all)."""
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text("")
    verifiers = f"sys.path.insert(0, {str(tmp_path)!r})" if verifiers_installed else "sys.modules['verifiers'] = None"
    code = "\n".join(
        [
            "import sys",
            "sys.modules['fastapi'] = None",
            verifiers,
            "from vtb_app.cli import main",
            "sys.exit(main(['serve']))",
        ]
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == ExitCode.MISSING_EXTRA, done.stderr
    return one_error_line(done.stderr)


def test_serve_without_its_extra_names_vtb_gym_serve_where_it_can_be_installed(tmp_path):
    line = _serve_without_fastapi(tmp_path, verifiers_installed=False)
    assert (
        line == "error: vtb serve needs the package 'fastapi', which is not installed: pip install \"vtb-gym[serve]\""
    )


def test_serve_without_its_extra_beside_verifiers_says_how_to_make_its_own_venv(tmp_path):
    """The README's venv holds verifiers (mcp 2.0.0): installing the serve extra there would break it."""
    line = _serve_without_fastapi(tmp_path, verifiers_installed=True)
    assert "cannot share this venv (openenv needs mcp < 2, verifiers pins mcp 2.0.0)" in line
    assert "bash scripts/setup_serve.sh" in line and "python3 -m venv .venv-serve" in line
    assert ": pip install" not in line  # the advice that would break this venv is not given
    script = ROOT / "scripts" / "setup_serve.sh"
    assert script.stat().st_mode & 0o111 and ".[serve,dev]" in script.read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0  # the advised script parses


def test_serve_says_how_far_task_generation_is(capsys, monkeypatch):
    monkeypatch.setattr(serve_command, "PROGRESS_EVERY_S", 0.0)
    tasks = serve_command._load("synth:3:0")
    lines = capsys.readouterr().err.splitlines()
    assert len(tasks) == 3 and [line.split(",")[0] for line in lines] == [
        f"vtb serve: generating synth:3:0: {n}/3 tasks" for n in (1, 2, 3)
    ]
