#!/usr/bin/env bash
# Create or update .venv in the repo root with the project and everything its tests need.
# Idempotent: a stamp of the dependency files skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
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
  # Without a GPU, pin the CPU build of torch (plain `torch` pulls several GB of CUDA packages), and torchvision
  # (the `train` extra's, for VLM processors) to torch's release so that pip keeps that torch.
  gpu=0; command -v nvidia-smi >/dev/null 2>&1 && gpu=1
  if [ "$gpu" = 0 ]; then
    .venv/bin/python -m pip install -q "torch==2.13.0" "torchvision==0.28.0"
  fi
  # The core dependencies include the synthetic tasks' six pinned font packages (font-source-sans-pro,
  # -source-serif-pro, -roboto (an sdist: built once), -lato, -caladea, -manrope; OFL / Apache-2.0).
  # Not the `serve` extra: openenv >= 0.4 needs fastmcp 3 (mcp < 2) and verifiers 0.4 pins mcp 2.0.0, so the two
  # cannot share a venv; scripts/test_py312.sh tests `vtb serve` on openenv 0.10. A venv from before OpenEnv's
  # rename drops openenv-core (it wrote the package `openenv`, which verifiers' MCP tooling does not need).
  if .venv/bin/python -m pip show -q openenv-core >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -q -y openenv-core
  fi
  # (setuptools' notice that an editable install is one is not news to whoever asked for it)
  PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e ".[hf,dev,eval,train,ray,verifiers,skyrl,ocr2]"
  if [ "$gpu" = 0 ]; then
    # PyPI's torchvision is a CUDA build that fails to import beside the CPU torch, and transformers would then fail
    # where it falls back to its PIL image processors; test_py312.sh (CUDA torch on the CPU) tests it.
    .venv/bin/python -m pip uninstall -q -y torchvision
  fi
  # rapidocr-onnxruntime's opencv-python requirement is left out on purpose (below): not a problem of this venv
  problems=$(.venv/bin/python -m pip check | grep -v "^rapidocr-onnxruntime .* requires opencv-python" || true)
  [ -z "$problems" ] || [ "$problems" = "No broken requirements found." ] \
    || { echo "setup: pip check: $problems" >&2; exit 1; }
  # The second OCR reader (docs/synth.md): its wheel carries its weights; --no-deps keeps its opencv-python
  # requirement from installing a second OpenCV over opencv-python-headless (the [ocr2] extra has the rest).
  # After `pip check`: that requirement is the one it would report.
  .venv/bin/python -m pip install -q --no-deps "rapidocr-onnxruntime==1.4.4" \
    || echo "setup: note: rapidocr-onnxruntime not installed (it needs Python < 3.13); its tests skip" >&2
  echo "$want" > "$stamp"
  .venv/bin/python -c "import importlib.metadata as m, sys; print('setup: .venv ready in $((SECONDS - began)) s: python', \
sys.version.split()[0], *[f'{d} {m.version(d)}' for d in ('vtb-gym', 'torch', 'transformers', 'trl', 'openai')])"
fi
