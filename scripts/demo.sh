#!/usr/bin/env bash
# Command 1: set up .venv (if needed) and run the main job on the embedded defaults
# (bundled demo tasks; no GPU, no API key, no internet).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/vtb info demo
