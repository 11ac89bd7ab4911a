#!/usr/bin/env bash
# Create or update .venv in the repo root with the project and everything its tests need.
# Idempotent: a stamp of the dependency files skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
# System packages from Debian, installed once when missing:
#   chromium       renders the HTML evaluation report in tests
#   tesseract-ocr  the OCR perception probe (synthetic tasks, baseline agent)
#   libseccomp2    the sandbox's seccomp layer (through pyseccomp)
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr)
ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || missing+=(libseccomp2)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]} with apt-get"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null \
    || echo "setup: WARNING: could not install ${missing[*]}; the tests that need them will fail or skip" >&2
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.vtb-setup-stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # Without a GPU, pin the CPU build of torch (plain `torch` pulls several GB of CUDA packages).
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q "torch==2.13.0"
  fi
  # The core dependencies include the synthetic tasks' six pinned font packages (font-source-sans-pro,
  # -source-serif-pro, -roboto (an sdist: built once), -lato, -caladea, -manrope; OFL / Apache-2.0).
  .venv/bin/python -m pip install -q -e ".[hf,dev,eval,train,ray,serve,verifiers,skyrl,ocr2]"
  # The second OCR reader (docs/synth.md): its wheel carries its weights; --no-deps keeps its opencv-python
  # requirement from installing a second OpenCV over opencv-python-headless (the [ocr2] extra has the rest).
  .venv/bin/python -m pip install -q --no-deps "rapidocr-onnxruntime==1.4.4" \
    || echo "setup: note: rapidocr-onnxruntime not installed (it needs Python < 3.13); its tests skip" >&2
  echo "$want" > "$stamp"
fi
