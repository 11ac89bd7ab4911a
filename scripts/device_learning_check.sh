#!/usr/bin/env bash
# The learning check on a GPU machine: the reading policy at 5 training seeds and its two controls, side by side
# on the machine's cores, each through the real TRL loop (docs/training/learning_check.md, "On a GPU machine"). Needs
# .gpu_carry/ from scripts/device_carry.sh; writes runs/device/ (or $OUT): the runs' JSON, logs, summary.json.
#   bash scripts/device_learning_check.sh [SEEDS [JOBS [THREADS [TIMEOUT_S]]]]     (defaults: 0-4 7 2 420)
set -euo pipefail
root=$PWD carry=$PWD/.gpu_carry out=${OUT:-$PWD/runs/device} site=/tmp/vtb-site
seeds=${1:-0-4} jobs=${2:-7} threads=${3:-2} timeout_s=${4:-420}
mkdir -p "$site" "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$carry"/whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$site" .  # vtb-gym
# a .pth file, not PYTHONPATH: the sandbox starts its workers with a clean environment
echo "$site" > "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vtb-carry.pth"
tar xJf "$carry/tess.tar.xz" -C /tmp
mkdir -p /tmp/tess/path
printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/tess/lib exec /tmp/tess/bin/tesseract "$@"\n' > /tmp/tess/path/tesseract
chmod +x /tmp/tess/path/tesseract
export PATH=/tmp/tess/path:$PATH TESSDATA_PREFIX=/tmp/tess/tessdata PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores $(nproc)"
cache=/tmp/ocr_cache.json
[ -f "$carry/ocr_cache.json" ] && cp "$carry/ocr_cache.json" "$cache"
# once, before the runs: every task picture and zoom this machine renders, read into the cache (a picture whose
# pixels differ from the carried cache's, e.g. another OpenCV, is read here by the carried Tesseract)
python3 - "$cache" <<'PY'
import argparse, sys, time
import torch, transformers, trl
from vtb_app.learning_tasks import load_learning_tasks
from vtb_app.learning_policies import cached_reader, load_ocr_cache, prepare_reading
from vtb_env.synth.stream import DEFAULT_GENERATOR
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__,
      "trl", trl.__version__, flush=True)
args = argparse.Namespace(policy="text", ocr_cache=sys.argv[1], ocr_workers=16)
loaded = load_ocr_cache(args)
# the check's default sets (scripts/learning_check.py), drawn as it draws them: pairs the reader confirms
specs = ("synth:288:0", "synth:48:1")
tasks = [t for spec in specs for t in load_learning_tasks(spec, DEFAULT_GENERATOR, cached_reader, 16)]
print("OCR cache:", prepare_reading(args, tasks, loaded), flush=True)
PY
cd "$root"
python3 scripts/learning_check_seeds.py --seeds "$seeds" --controls --jobs "$jobs" --threads "$threads" \
  --timeout "$timeout_s" --out "$out" -- --ocr-cache "$cache"
