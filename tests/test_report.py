"""`vtb report`: tables, plots, and the HTML report rendered in real headless Chromium."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.menu_tasks import ROOT, write_menu_tasks

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def vtb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vtb_app.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    data = write_menu_tasks(root / "data", n=3)
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6+7"}'}}

    def respond(request):  # one tool call, then the answer
        return {"content": "The answer is 13."} if request["messages"][-1]["role"] == "tool" else {"tool_calls": [call]}

    with ChatServer(respond) as server:
        for name in ("tools", "no_tools"):
            ablation = "strong" if name == "tools" else "no_tools"
            result = vtb(*eval_args(data, f"openai:m@{server.base_url}", root / name, "--ablation", ablation))
            assert result.returncode == 0, result.stderr
    result = vtb(
        "report",
        f"with tools={root / 'tools'}",
        f"no tools={root / 'no_tools'}",
        "--out",
        str(root / "report"),
        "--all-tables",
    )
    assert result.returncode == 0, result.stderr
    assert "APR (%) by turn case and domain (table 3)" in result.stdout and "HTML report:" in result.stdout
    return root / "report"


@pytest.mark.slow
def test_report_writes_tables_and_real_pngs(report):
    for name in ("apr_by_category", "apr_vs_tool_use", "image_operations"):
        with Image.open(report / f"{name}.png") as image:
            assert image.format == "PNG" and image.width > 300
    tables = (report / "tables.md").read_text()
    assert "| with tools" in tables and "| no tools" in tables and "Tool use (table 7)" in tables


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(report, chromium, tmp_path):
    page = (report / "report.html").resolve().as_uri()
    common = [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page], capture_output=True, text=True, timeout=90).stdout
    assert dom.count('class="trajectory"') == 6  # 3 tasks x 2 runs
    assert dom.count('class="verdicts"') == 6 and dom.count('class="seen"') == 6
    assert dom.count('<img class="plot"') == 3 and "calculator" in dom and "The answer is 13." in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1200,900", page], capture_output=True, timeout=90)
    with Image.open(shot) as image:
        assert image.size == (1200, 900)
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50  # text, tables and plots drew, not a blank page


def test_report_prints_a_summary_in_100_columns(report, tmp_path):
    long_name = "a run name far longer than a column holds"
    runs = [f"{long_name}={report.parent / 'tools'}", f"no tools={report.parent / 'no_tools'}"]
    result = vtb("report", *runs, "--out", str(tmp_path / "r"))
    summary = [line for line in result.stdout.splitlines() if line.startswith(("Overall", "|", ">"))]
    assert result.returncode == 0 and max(map(len, summary)) <= 100, result.stdout
    header = [cell.strip() for cell in summary[1].split("|")[1:-1]]
    assert header == ["run", "APR (%) [95% CI]", "ARS", "MCC", "calls/task", "reward"]
    assert "| a run name far long… |" in result.stdout and "| no tools" in result.stdout


@pytest.mark.slow
def test_html_report_fits_the_page_and_stays_small(report, chromium, tmp_path):
    """Wide tables scroll inside their own box: the page is never wider than the window; images are thumbnails."""
    measured = tmp_path / "measured.html"
    page = "document.documentElement"
    probe = f"<script>document.body.dataset.overflow = {page}.scrollWidth - {page}.clientWidth</script>"
    measured.write_text((report / "report.html").read_text().replace("</body>", probe + "</body>"))
    common = [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", measured.as_uri()]
    for width in (1200, 800):
        dom = subprocess.run([*common, f"--window-size={width},900"], capture_output=True, text=True, timeout=90)
        assert 'data-overflow="0"' in dom.stdout, (width, dom.stdout[-300:])
    thumbnails = re.findall(r'src="data:image/jpeg;base64,([^"]+)"', (report / "report.html").read_text())
    sides = [max(Image.open(io.BytesIO(base64.b64decode(t))).size) for t in thumbnails]
    assert sides and max(sides) <= 360  # the size the page shows them at


@pytest.mark.slow
def test_html_notes_sit_below_the_scroll_bar_of_their_table(report, chromium, tmp_path):
    """A table wider than the window scrolls in its box; its notes start below that box, scroll bar included."""
    measured = tmp_path / "measured.html"
    probe = """<script>
    const blocks = [...document.querySelectorAll('.table-block')].filter(b => b.querySelector('p.note'));
    const gaps = blocks.map(b => b.querySelector('p.note').getBoundingClientRect().top
                                 - b.querySelector('.wide').getBoundingClientRect().bottom);
    const wide = [...document.querySelectorAll('.table-block .wide')].filter(w => w.scrollWidth > w.clientWidth);
    document.body.dataset.gaps = gaps.map(Math.round).join(',');
    document.body.dataset.scrolling = wide.length;
    </script>"""
    measured.write_text((report / "report.html").read_text().replace("</body>", probe + "</body>"))
    common = [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", measured.as_uri()]
    dom = subprocess.run([*common, "--window-size=1400,2000"], capture_output=True, text=True, timeout=90).stdout
    gaps = [int(gap) for gap in re.search(r'data-gaps="([^"]*)"', dom).group(1).split(",")]
    assert int(re.search(r'data-scrolling="(\d+)"', dom).group(1)) >= 1  # the overall table scrolls at 1400 px
    assert len(gaps) >= 5 and min(gaps) >= 0, gaps


def test_judge_and_report_stay_inside_their_run_directories(tmp_path):
    """Issue 11 item 14: a records.jsonl with crafted image paths (absolute, `..`, links) makes
    `vtb judge` and `vtb report` neither read nor write anything outside their run directories."""
    import json
    import os

    data = write_menu_tasks(tmp_path / "data", n=1)
    with ChatServer(lambda request: {"content": "The answer is 9."}) as server:
        result = vtb(*eval_args(data, f"openai:m@{server.base_url}", tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    secret = tmp_path / "secret.png"
    Image.new("RGB", (40, 40), (250, 10, 10)).save(secret)
    os.symlink(secret, tmp_path / "run" / "images" / "link.png")
    crafted = {
        "a.png": str(secret),
        "b.png": "../secret.png",
        "c.png": "images/../../secret.png",
        "d.png": "images/link.png",
        "e.png": "images/../../../../etc/hostname",
        "f.png": ["images", "x"],
    }
    path = tmp_path / "run" / "records.jsonl"
    record = json.loads(path.read_text().splitlines()[0])
    record["image_files"] = crafted
    record["episode"]["metadata"]["images"] = [{"name": name, "sha256": "0" * 64} for name in crafted]
    path.write_text(json.dumps(record) + "\n")
    outside_before = sorted(p.name for p in tmp_path.iterdir())

    result = vtb("judge", str(tmp_path / "run"), "--judge", "exact", "--out", str(tmp_path / "rejudged"))
    assert result.returncode == 0, result.stderr
    rejudged = json.loads((tmp_path / "rejudged" / "records.jsonl").read_text().splitlines()[-1])
    assert rejudged["image_files"] == {}  # nothing crafted was followed or copied
    assert not any(
        p.is_symlink() or p.read_bytes() == secret.read_bytes()
        for p in (tmp_path / "rejudged").rglob("*")
        if p.is_file() or p.is_symlink()
    )
    result = vtb("report", str(tmp_path / "run"), str(tmp_path / "rejudged"), "--out", str(tmp_path / "report-crafted"))
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "report-crafted" / "report.html").read_text()
    assert "data:image/jpeg" not in html  # no thumbnail made from a file outside the run
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*outside_before, "rejudged", "report-crafted"])
