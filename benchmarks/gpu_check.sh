#!/usr/bin/env bash
# The one prepared GPU check (issue 6), for a session that has the device machine:
#   bash benchmarks/gpu_check.sh DATA_DIR OUT_DIR
# DATA_DIR holds Multi30k train.{de,en} and val.{de,en}; OUT_DIR gets the runs and gpu-results.md.
# 1. the base preset, bf16 autocast, --batch-tokens auto, 4 minutes: tokens/s and MFU;
# 2. the same for 1 minute in fp16 (gradient scaler) and 1 minute with torch.compile;
# 3. the CUDA-only parts of the test suite (fused attention equals explicit attention, etc.).
set -euo pipefail
DATA=${1:?Multi30k folder}
OUT=${2:?output folder}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
common=(--train-src "$DATA/train.de" --train-tgt "$DATA/train.en" --valid-src "$DATA/val.de"
        --valid-tgt "$DATA/val.en" --preset base --device cuda --batch-tokens auto
        --set train.valid_every=1000000 --set train.log_every=20 --set decode.beam=1 --cache "$OUT/cache")
python -m mt_cli train "${common[@]}" --out "$OUT/bf16" --max-minutes 4 --set train.amp=bf16
python -m mt_cli train "${common[@]}" --out "$OUT/fp16" --max-minutes 1 --set train.amp=fp16 --tokenizer "$OUT/bf16/tokenizer"
python -m mt_cli train "${common[@]}" --out "$OUT/compile" --max-minutes 1 --set train.amp=bf16 --set train.compile=true \
  --tokenizer "$OUT/bf16/tokenizer"
python - "$OUT" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
lines = [f"## gpu_check.sh on {(out / 'gpu.txt').read_text().strip()}", "",
         "| run | steps | median tgt tok/s | median MFU |", "|---|---|---|---|"]
for run in ("bf16", "fp16", "compile"):
    entries = [json.loads(x) for x in (out / run / "log.jsonl").read_text().splitlines()]
    train = [e for e in entries if "tokens_per_s" in e][1:]  # the first window holds warm-up
    lines.append(f"| {run} | {train[-1]['step']} | {statistics.median(e['tokens_per_s'] for e in train):,.0f} | "
                 f"{100 * statistics.median(e['mfu'] for e in train):.1f}% |")
(out / "gpu-results.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
python -m pytest -q tests/test_model.py tests/test_runtime.py 2>&1 | tail -3
