#!/usr/bin/env bash
# Command 1: set up .venv (if needed), then evaluate the OCR baseline agent (a scripted solver for the
# synthetic tasks: it shows the pipeline runs without a GPU, its tool gain says nothing about the benchmark) on the bundled demo
# tasks with the exact judge, with and without tools, and print the comparison table (APR, ARS,
# MCC, tool use, reward) and the path of the HTML report (no GPU, no API key, no internet).
# Each run writes a fresh directory runs/demo/<timestamp>; VTB_DEMO_OUT=DIR writes to DIR
# instead, and re-running with the same DIR resumes (finished episodes are not run again).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/setup.sh
echo "note: the OCR baseline is a scripted solver for the synthetic tasks (rules written for the generator's"
echo "      wordings and layouts): it proves the pipeline runs end to end without a GPU; its gain from tools"
echo "      is not evidence about VisualToolBench or about any model (docs/ocr_baseline.md)"
out=${VTB_DEMO_OUT:-runs/demo/$(date +%Y%m%d-%H%M%S)}
for ablation in strong no_tools; do
  echo "== vtb eval: OCR baseline, exact judge, ablation '$ablation' -> $out/$ablation"
  .venv/bin/vtb eval --data demo --agent ocr-baseline --judge exact --ablation "$ablation" \
    --concurrency 2 --out "$out/$ablation" --resume
done
echo "== vtb report (MCC: mode labels from the no_tools run of the same agent, its text-only pass)"
.venv/bin/vtb report "with tools=$out/strong" "no tools=$out/no_tools" --out "$out/report"
echo "demo finished in $((SECONDS - start)) s (the OCR baseline: a scripted solver for the synthetic tasks, not a model)"
