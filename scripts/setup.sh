#!/usr/bin/env bash
# Create or update .venv in the repo root with the project and everything its tests need.
# Idempotent: a stamp of the dependency files skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Headless Chromium renders the HTML evaluation report in tests (Debian package).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
# Tesseract OCR is the perception probe of the synthetic task generator (Debian package).
if ! command -v tesseract >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null
  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null
  fi
fi
PY=${PYTHON:-python3}
# The sandbox's seccomp layer loads libseccomp through pyseccomp.
if ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y libseccomp2 >/dev/null
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.vtb-setup-stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # Without a GPU, pin the CPU build of torch (plain `torch` pulls several GB of CUDA packages).
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q "torch==2.13.0"
  fi
  .venv/bin/python -m pip install -q -e ".[hf,dev,eval,train]"
  echo "$want" > "$stamp"
fi
