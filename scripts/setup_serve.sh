#!/usr/bin/env bash
# Create or update .venv-serve: the project with its `serve` extra (`vtb serve`), in a venv of its own.
# The serve extra cannot join .venv (scripts/setup.sh): openenv >= 0.4 needs fastmcp 3, i.e. mcp < 2, while the
# verifiers extra there pins mcp 2.0.0; installing one beside the other breaks the one installed first. This venv
# holds the core, `serve` and `dev` only. Idempotent (a stamp of the dependency files skips pip). Then:
#   .venv-serve/bin/vtb serve --help
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-serve
PY=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
stamp=$venv/.vtb-setup-stamp
want=$(cat pyproject.toml scripts/setup_serve.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  PYTHONWARNINGS="ignore:Editable installation" "$venv/bin/python" -m pip install -q -e ".[serve,dev]"
  "$venv/bin/python" -m pip check
  echo "$want" > "$stamp"
fi
echo "setup_serve: $venv ready; run $venv/bin/vtb serve"
