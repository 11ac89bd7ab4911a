#!/usr/bin/env bash
# Command 1: set up .venv (if needed), then evaluate the OCR baseline agent on the bundled demo
# tasks with the exact judge, with and without tools, and print the comparison table (APR, ARS,
# MCC, tool use, reward) and the path of the HTML report (no GPU, no API key, no internet).
# Each run writes a fresh directory runs/demo/<timestamp>; VTB_DEMO_OUT=DIR writes to DIR
# instead, and re-running with the same DIR resumes (finished episodes are not run again).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/setup.sh
out=${VTB_DEMO_OUT:-runs/demo/$(date +%Y%m%d-%H%M%S)}
for ablation in strong no_tools; do
  echo "== vtb eval: OCR baseline, exact judge, ablation '$ablation' -> $out/$ablation"
  .venv/bin/vtb eval --data demo --agent ocr-baseline --judge exact --ablation "$ablation" \
    --concurrency 2 --out "$out/$ablation" --resume
done
echo "== vtb report (MCC: mode labels from the no_tools run of the same agent, its text-only pass)"
.venv/bin/vtb report "with tools=$out/strong" "no tools=$out/no_tools" --out "$out/report"
echo "demo finished in $((SECONDS - start)) s"
