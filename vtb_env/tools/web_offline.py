"""Offline backend of ``web_search`` / ``browser_get_page_text``: a local BM25 index and page store.

SQLite FTS5 (in the standard library: no new dependency, BM25 ranking built in, Porter stemming,
snippets) over the project's corpus ``vtb_env/data/corpus/*.jsonl`` (lines ``{"url","title","text"}``)
plus any user folders of ``.jsonl``, ``.txt``, ``.html``/``.htm`` files. Pages are stored by URL;
user files get ``local://<folder>/<relative path>`` URLs.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Iterable, Iterator

from vtb_env.tools.html_text import html_to_text

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus"
_WORD = re.compile(r"\w+", re.UNICODE)


class PageNotFound(LookupError):
    """No page with that URL in the offline corpus."""


def iter_documents(folder: str | os.PathLike) -> Iterator[dict[str, str]]:
    """Every document under ``folder``: JSONL lines, text files and HTML files."""
    root = Path(folder)
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        record = json.loads(line)
                        if not record.get("url") or not record.get("text"):
                            raise ValueError(f"{path}:{number}: a document needs 'url' and 'text'")
                        yield {"url": record["url"], "title": record.get("title", ""), "text": record["text"]}
        elif suffix in (".txt", ".md", ".html", ".htm"):
            raw = path.read_text(encoding="utf-8", errors="replace")
            url = f"local://{root.name}/{path.relative_to(root).as_posix()}"
            if suffix in (".html", ".htm"):
                title, text = html_to_text(raw)
            else:
                title, text = (raw.strip().splitlines() or [path.stem])[0][:200], raw
            yield {"url": url, "title": title or path.stem, "text": text}


class LocalCorpus:
    """A BM25 full-text index and a page store in one in-memory SQLite database."""

    def __init__(self, folders: Iterable[str | os.PathLike] = (DEFAULT_CORPUS,)):
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(url UNINDEXED, title, text, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        self.folders = [str(f) for f in folders]
        for folder in self.folders:
            if os.path.isdir(folder):
                self.add(iter_documents(folder))

    def add(self, documents: Iterable[dict[str, str]]) -> int:
        rows = [(_normal_url(d["url"]), d.get("title", ""), d["text"]) for d in documents]
        with self._lock:
            self._db.executemany("INSERT INTO docs (url, title, text) VALUES (?, ?, ?)", rows)
            self._db.commit()
        return len(rows)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def search(self, query: str, num_results: int) -> list[dict[str, str]]:
        words = _WORD.findall(query.lower())
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        with self._lock:
            rows = self._db.execute(
                "SELECT url, title, snippet(docs, 2, '', '', '…', 40) FROM docs WHERE docs MATCH ? "
                "ORDER BY bm25(docs, 0.0, 3.0, 1.0) LIMIT ?",
                (match, num_results),
            ).fetchall()
        return [{"title": title, "url": url, "snippet": snippet} for url, title, snippet in rows]

    def page(self, url: str) -> dict[str, str]:
        with self._lock:
            row = self._db.execute("SELECT url, title, text FROM docs WHERE url = ?", (_normal_url(url),)).fetchone()
        if row is None:
            raise PageNotFound(f"no page {url!r} in the offline corpus (search first, then open a result's url)")
        return {"url": row[0], "title": row[1], "text": row[2]}


def _normal_url(url: str) -> str:
    url = url.strip()
    return url[:-1] if url.endswith("/") and url.count("/") > 3 else url
