"""Every user error of ``vtb`` is one line on stderr with an exit code per kind, no traceback
(issue 22, item 7); ``--debug`` or ``VTB_DEBUG=1`` shows the traceback; a run's failures are
counted by kind with the first message of each. Before, 8 of 18 such commands printed a
traceback and every failure exited 1 or 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args, one_error_line, run_cli
from tests.support.menu_tasks import ROOT, write_menu_tasks
from vtb_app import cli
from vtb_app.errors import ExitCode, error_kind, error_kinds


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nobody listens once the probe is closed


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["report", "{tmp}/nonexistent", "--out", "{tmp}/r"], ExitCode.NOT_FOUND, "no records.jsonl"),
        (["eval", "--data", "{tmp}/nope", "--out", "{tmp}/e"], ExitCode.NOT_FOUND, "no such file or directory"),
        (["eval", "--agent", "foo:bar", "--out", "{tmp}/e"], ExitCode.USAGE, "unknown agent 'foo:bar'"),
        (["eval", "--judge", "nope", "--out", "{tmp}/e"], ExitCode.USAGE, "unknown judge 'nope'"),
        (["eval", "--mode-labels", "{tmp}/m.json", "--out", "{tmp}/e"], ExitCode.NOT_FOUND, "no mode-label file"),
        (["label-modes", "--data", "{tmp}/nope", "--out", "{tmp}/l"], ExitCode.NOT_FOUND, "no such file"),
        (["judge", "{tmp}/nonexistent", "--judge", "exact", "--out", "{tmp}/j"], ExitCode.NOT_FOUND, "no config.json"),
        (["info", "{tmp}/nope"], ExitCode.NOT_FOUND, "no such file or directory"),
        (["info", "synth:x:y"], ExitCode.USAGE, "expected synth:N:SEED"),
        (
            ["import-toolkit", "{tmp}/nope.json", "--data", "demo", "--judge", "exact", "--out", "{tmp}/i"],
            ExitCode.NOT_FOUND,
            "cannot read the toolkit's model-response JSON",
        ),
        (
            ["import-toolkit", "{tmp}/bad.json", "--data", "demo", "--judge", "exact", "--out", "{tmp}/i"],
            ExitCode.BAD_DATA,
            "expected the toolkit's",
        ),
        (["synth", "--n", "1", "--out", "{tmp}/file.txt/sub"], ExitCode.NOT_FOUND, "file.txt"),
        (["synth", "--n", "1"], ExitCode.USAGE, "--out is required"),
    ],
)
def test_user_errors_are_one_line_with_their_exit_code(tmp_path, capsys, argv, code, says):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    (tmp_path / "bad.json").write_text('{"not": "a list"}')
    result, _, err = run_cli(capsys, *(arg.format(tmp=tmp_path) for arg in argv))
    assert result == code and says in one_error_line(err), (result, err)


def test_debug_flag_or_variable_shows_the_traceback(tmp_path, monkeypatch):
    argv = ["report", str(tmp_path / "nonexistent"), "--out", str(tmp_path / "r")]
    for debug_argv in (["--debug", *argv], [*argv, "--debug"]):
        with pytest.raises(FileNotFoundError):
            cli.main(debug_argv)
    monkeypatch.setenv("VTB_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        cli.main(argv)


def test_a_bug_is_one_line_asking_for_debug(capsys, monkeypatch):
    from vtb_app.commands import info

    monkeypatch.setattr(info, "run", lambda args: [][1])  # registered as the subcommand when the parser is built
    code, _, err = run_cli(capsys, "info", "demo")
    assert code == ExitCode.INTERNAL
    assert (
        one_error_line(err)
        == "error: internal error: IndexError: list index out of range (run with --debug for the traceback)"
    )


def test_unreachable_agent_server_says_why(tmp_path, capsys, monkeypatch):
    from vtb_agents.openai_chat import OpenAIChatAgent

    real_init = OpenAIChatAgent.__init__
    monkeypatch.setattr(
        OpenAIChatAgent, "__init__", lambda self, *a, **k: real_init(self, *a, **{**k, "max_retries": 0})
    )
    data = write_menu_tasks(tmp_path / "data", n=2)
    argv = eval_args(data, f"openai:m@http://127.0.0.1:{closed_port()}/v1", tmp_path / "run")
    code, out, err = run_cli(capsys, *argv)
    assert code == ExitCode.UNREACHABLE and "0 done, 2 errors" in out
    line = one_error_line(err)
    assert "a server could not be reached: 2 x ConnectError, first: AgentCallError: openai:m: ConnectError:" in line
    assert "Connection refused" in line


def test_failures_of_a_run_are_counted_by_kind_with_the_first_message(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=3)

    def respond(request):
        if "Lemon Soda" in json.dumps(request["messages"]):
            return {"status": 400, "body": {"error": {"message": "content policy"}}}
        return {"content": "The answer is 13."}

    with ChatServer(respond) as server:
        code, out, err = run_cli(capsys, *eval_args(data, f"openai:m@{server.base_url}", tmp_path / "run"))
    assert code == ExitCode.FAILED_ITEMS and "2 done, 1 errors" in out
    assert err.strip() == "errors: 1 x AgentCallError, first: AgentCallError: openai:m: HTTP 400: content policy"


def test_error_kinds_name_the_innermost_exception():
    messages = [
        "AgentCallError: openai:m: ConnectError: refused",
        "AgentCallError: m: ConnectError: x",
        "boom: no name",
    ]
    assert error_kind(messages[0]) == "ConnectError" and error_kind(messages[2]) == "boom"
    assert error_kinds(messages) == [
        "2 x ConnectError, first: AgentCallError: openai:m: ConnectError: refused",
        "1 x boom, first: boom: no name",
    ]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """A finished `vtb eval` run of one menu task (a scripted chat server, exact judge)."""
    root = tmp_path_factory.mktemp("demo")
    with ChatServer(lambda request: {"content": "The answer is 13."}) as server:
        argv = eval_args(write_menu_tasks(root / "data", n=1), f"openai:m@{server.base_url}", root / "run")
        assert cli.main(argv) == 0
    return root / "run"


MISSING_EXTRAS = [
    ("matplotlib", ["report", "{run}", "--out", "{tmp}/report"], "vtb report", "eval"),
    # fastapi is the first serve package vtb serve imports, so a base install reports it
    ("fastapi", ["serve", "--port", "0"], "vtb serve", "serve"),
    ("torch", ["eval", "--agent", "hf:{tmp}/model", "--limit", "1", "--out", "{tmp}/e"], "vtb eval", "hf"),
]


@pytest.mark.parametrize(("package", "argv", "command", "extra"), MISSING_EXTRAS, ids=[m[0] for m in MISSING_EXTRAS])
def test_a_missing_extra_names_the_pip_install(tmp_path, demo_run, package, argv, command, extra):
    """A base install, as a fresh interpreter sees it: the package cannot be imported at all."""
    run_dir = demo_run
    code = (
        # no verifiers either: where it is installed the serve extra's advice is another venv (test_cli_usage_errors)
        f"import sys\nsys.modules[{package!r}] = None\nsys.modules['verifiers'] = None\nfrom vtb_app.cli import main\n"
        f"sys.exit(main({[a.format(tmp=tmp_path, run=run_dir) for a in argv]!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == ExitCode.MISSING_EXTRA, done.stderr
    line = one_error_line(done.stderr)
    assert (
        line
        == f'error: {command} needs the package {package!r}, which is not installed: pip install "vtb-gym[{extra}]"'
    )
