#!/usr/bin/env bash
# Command 1: set up .venv (if needed), then evaluate the OCR baseline agent on the bundled demo
# tasks with the exact judge, with and without tools, and print the comparison table and the
# path of the HTML report (no GPU, no API key, no internet). Re-running resumes: finished
# episodes are not run again. VTB_DEMO_OUT chooses the output directory (default runs/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${VTB_DEMO_OUT:-runs/demo}
for ablation in strong no_tools; do
  echo "== vtb eval: OCR baseline, exact judge, ablation '$ablation'"
  .venv/bin/vtb eval --data demo --agent ocr-baseline --judge exact --ablation "$ablation" \
    --concurrency 2 --out "$out/$ablation" --resume
done
echo "== vtb report"
exec .venv/bin/vtb report "with tools=$out/strong" "no tools=$out/no_tools" --out "$out/report"
