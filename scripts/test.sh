#!/usr/bin/env bash
# Command 2: set up .venv (if needed), check the code (ruff lint and format, the import layers), run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .  # the tree stays `ruff format`ted (line length 120)
.venv/bin/lint-imports --no-cache  # the layers contract in pyproject.toml (docs/architecture.md)
exec .venv/bin/python -m pytest -q "$@"
