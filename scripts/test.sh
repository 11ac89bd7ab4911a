#!/usr/bin/env bash
# Command 2: set up .venv (if needed), check the code (ruff, the import layers), run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache  # the layers contract in pyproject.toml (docs/architecture.md)
exec .venv/bin/python -m pytest -q "$@"
