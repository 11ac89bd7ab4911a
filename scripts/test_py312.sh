#!/usr/bin/env bash
# CI stage "py312": the integrations whose newest releases cannot share the main venv, on Python 3.12 in their own
# venv (.venv-py312, cached by a stamp):
#   - SkyRL's trainer config (skyrl 0.3.0: its typed config fails to build on Python 3.11, SkyRL's own bug);
#   - `vtb serve` on openenv 0.10 and TRL 1.16's OpenEnv harness (openenv >= 0.4 needs fastmcp 3, i.e. mcp < 2,
#     while verifiers 0.4 in the main venv pins mcp 2.0.0);
#   - the judge and agent clients on openai 3.x (verifiers 0.4 pins openai < 3 in the main venv).
# torch comes from PyPI as pip resolves it (PyPI has no CPU build for Linux: the CUDA build, ~5 GB, runs on the CPU).
# `pip check` must pass. Prints the versions, the venv set-up time and the stage's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
venv=.venv-py312

find_python312() {
  local candidate
  for candidate in "${PYTHON312:-}" python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
    [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null \
      && { echo "$candidate"; return 0; }
  done
  echo "test_py312: no Python 3.12 found (set PYTHON312=/path/to/python3.12)" >&2
  return 1
}

[ -x "$venv/bin/python" ] || "$(find_python312)" -m venv "$venv"
stamp=$venv/.vtb-setup-stamp
want=$(cat pyproject.toml scripts/test_py312.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  # loguru, omegaconf, aiohttp, ray, jaxtyping, torchdata: what skyrl 0.3.0's config and main_base import without
  # declaring them (its skyrl-train extra declares them, and flash-attn, which needs CUDA to build)
  PYTHONWARNINGS="ignore:Editable installation" "$venv/bin/python" -m pip install -q -e ".[dev,serve,skyrl,train]" "skyrl==0.3.0" "openai>=3" \
    loguru omegaconf aiohttp ray jaxtyping torchdata
  "$venv/bin/python" -m pip check
  echo "$want" > "$stamp"
fi
"$venv/bin/python" -c "import importlib.metadata as m, sys; print('test_py312: python', sys.version.split()[0], \
*[f'{d} {m.version(d)}' for d in ('skyrl', 'skyrl-gym', 'openenv', 'trl', 'transformers', 'openai', 'torch')])"
echo "test_py312: venv ready in $((SECONDS - began)) s"
status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_skyrl_env.py tests/test_skyrl_config.py \
  tests/test_openenv_server.py tests/test_openenv_trl.py tests/test_serve_attacks.py tests/test_judge_openai.py \
  tests/test_agents_openai.py tests/test_train_args.py tests/test_cli_usage_errors.py \
  "$@" || status=$?
echo "test_py312: stage took $((SECONDS - began)) s"
exit "$status"
