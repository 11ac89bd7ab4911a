"""Damaged files are named, not skipped (issue 41, item 6): through the real ``vtb`` CLI on real run folders.

A garbled line of ``records.jsonl`` is reported on ``--resume`` (how many, which); a judge cache that is not a
SQLite file and a truncated ``config.json`` are data errors (exit 5, one line naming the file).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args, one_error_line, run_cli
from tests.support.menu_tasks import write_menu_tasks
from vtb_app import cli
from vtb_app.errors import ExitCode
from vtb_app.evaluation.records import RunLog, iter_records, unreadable_report


@pytest.fixture(scope="module")
def server():
    with ChatServer(lambda request: {"content": "The answer is 13."}) as chat:
        yield chat


@pytest.fixture()
def finished_run(tmp_path, server):
    """A finished `vtb eval` run of three menu tasks and the command line that made it."""
    argv = eval_args(write_menu_tasks(tmp_path / "data", n=3), f"openai:m@{server.base_url}", tmp_path / "run")
    assert cli.main(argv) == 0
    return tmp_path / "run", argv


def test_unreadable_lines_are_numbered_whatever_is_wrong_with_them(tmp_path):
    path = tmp_path / "records.jsonl"
    with RunLog(path) as log:
        log.append({"key": "a#0", "status": "ok"})
    with open(path, "ab") as handle:
        handle.write(b'{"key": "b#0", "sta\n')  # garbled
        handle.write(b"\xff\xfe not utf-8\n")
        handle.write(b"[1, 2]\n")  # JSON, but no record
        handle.write(b'{"key": "c#0", "status": "ok"}\n')
        handle.write(b'{"key": "d#0"')  # torn last line
    lines: list[int] = []
    assert [r["key"] for r in iter_records(path, lines)] == ["a#0", "c#0"]  # a bad line stops nothing after it
    assert lines == [2, 3, 4, 6]
    report = unreadable_report(path)
    assert report.startswith(f"4 line(s) of {path} could not be read") and "(line 2, 3, 4, 6)" in report
    assert unreadable_report(tmp_path / "none.jsonl") is None


def test_resume_says_how_many_lines_it_could_not_read_and_where(finished_run, capsys):
    run_dir, argv = finished_run
    records = run_dir / "records.jsonl"
    lines = records.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    lines[1] = b'{"key": "menu-1#0", "status": "o\x00\x01garbled\n'
    records.write_bytes(lines[0] + lines[1] + lines[2] + b"\xff\xff\n")
    code, out, err = run_cli(capsys, *argv, "--resume")
    assert code == 0, err
    assert f"warning: 2 line(s) of {records} could not be read as records and are skipped (line 2, 4)" in err
    assert "1 done, 0 errors, 2 already done" in out  # the garbled item ran again, nothing else
    assert sorted(r["key"] for r in iter_records(records)) == ["menu-0#0", "menu-1#0", "menu-2#0"]


def test_a_clean_resume_says_nothing_about_unreadable_lines(finished_run, capsys):
    run_dir, argv = finished_run
    code, out, err = run_cli(capsys, *argv, "--resume")
    assert code == 0 and "could not be read" not in err and "0 done, 0 errors, 3 already done" in out, err


@pytest.mark.parametrize("content", [b"SQLite format 3\x00" + b"\x07" * 200, b"not a database at all" * 50])
def test_a_damaged_judge_cache_is_a_data_error_naming_the_file(finished_run, server, tmp_path, capsys, content):
    run_dir, _ = finished_run
    out = tmp_path / "judged"
    out.mkdir()
    cache = out / "judge_cache.sqlite"
    cache.write_bytes(content)
    code, _, err = run_cli(capsys, "judge", run_dir, "--judge", f"openai:m@{server.base_url}", "--out", out)
    line = one_error_line(err)
    assert code == ExitCode.BAD_DATA and line.startswith(f"error: {cache}: cannot be read as a cache ("), line
    assert "move it aside" in line and cache.read_bytes() == content  # named, and left as it was for the user


@pytest.mark.parametrize("damage", ["truncated", "a list"])
def test_a_damaged_config_is_a_data_error_naming_the_file(finished_run, tmp_path, capsys, damage):
    run_dir, argv = finished_run
    config = run_dir / "config.json"
    text = config.read_text()
    config.write_text(text[: len(text) // 2] if damage == "truncated" else json.dumps([1, 2]))
    for command in (argv + ["--resume"], ["report", run_dir, "--out", tmp_path / "report"]):
        code, _, err = run_cli(capsys, *command)
        line = one_error_line(err)
        assert code == ExitCode.BAD_DATA and line.startswith(f"error: {config}: not a run configuration"), line
    shutil.rmtree(tmp_path / "report", ignore_errors=True)
