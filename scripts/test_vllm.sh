#!/usr/bin/env bash
# CI stage "vllm": integration tests against real vLLM servers (CPU build without a GPU).
# Sets up .venv and .venv-vllm (both cached by stamps), then runs the tests marked `vllm`;
# prints the measured start-up and request times and the stage's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
bash scripts/setup.sh
bash scripts/vllm_server.sh install
echo "test_vllm: venvs ready in $((SECONDS - began)) s"
metrics=runs/vllm-metrics.json
rm -f "$metrics"
status=0
VTB_VLLM_METRICS=$metrics .venv/bin/python -m pytest -m vllm tests/integration -q -p no:cacheprovider "$@" || status=$?
[ -f "$metrics" ] && echo "test_vllm: measured $(tr -d ' \n' < "$metrics")"
echo "test_vllm: stage took $((SECONDS - began)) s"
exit "$status"
