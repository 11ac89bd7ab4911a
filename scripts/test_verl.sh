#!/usr/bin/env bash
# CI stage "verl": the verl adapter tests in a verl user's environment. Its own venv (.venv-verl, cached by a
# stamp) holds verl==0.9.1 with its pinned dependencies as pip resolves them (transformers<5.11,
# tensordict<=0.10, ray, peft, ...), torch's CPU build without a GPU, and the project with its `hf` and `dev`
# extras; `pip check` must pass. Prints the venv set-up and the stage's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
venv=.venv-verl
PY=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
stamp=$venv/.vtb-setup-stamp
want=$(cat pyproject.toml scripts/test_verl.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  torch="torch"  # the pin that keeps pip from pulling a CUDA build (several GB) on a machine without a GPU
  command -v nvidia-smi >/dev/null 2>&1 || torch="torch==2.13.0"
  # cachetools, fastapi, uvicorn: verl 0.9.1's agent loop imports them without declaring them (they arrive
  # with its vllm/sglang extras, which need a GPU)
  "$venv/bin/python" -m pip install -q "verl==0.9.1" -e ".[hf,dev]" "$torch" cachetools fastapi uvicorn
  "$venv/bin/python" -m pip check
  echo "$want" > "$stamp"
fi
"$venv/bin/python" -c "import importlib.metadata as m; print('test_verl: verl', m.version('verl'), \
'transformers', m.version('transformers'), 'tensordict', m.version('tensordict'), 'torch', m.version('torch'))"
echo "test_verl: venv ready in $((SECONDS - began)) s"
status=0
"$venv/bin/python" -m pytest tests/test_verl_adapter.py -q -p no:cacheprovider "$@" || status=$?
echo "test_verl: stage took $((SECONDS - began)) s"
exit "$status"
