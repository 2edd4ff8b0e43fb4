#!/usr/bin/env bash
# The one prepared GPU check, for a session that has the device machine. One command, under 6 minutes:
#   bash benchmarks/gpu_check.sh DATA_DIR OUT_DIR
# DATA_DIR holds Multi30k train.{de,en} and val.{de,en}. The device machine sees only the working
# tree, so copy them into the git-ignored data/multi30k/ and carry that path, e.g.
#   run(command="bash benchmarks/gpu_check.sh data/multi30k $OUT/gpu", carry=["data/multi30k"])
# 1. the CUDA tests (tests/test_cuda.py alone, so that the serving and export tests' packages need not
#    be there: bf16/fp16 steps, fused attention, the batch probe, NCCL when
#    two GPUs exist, bitwise resume under --deterministic, decoding parity with the CPU);
# 2. the base preset, bf16 autocast, --batch-tokens auto, 2 minutes: tokens/s and MFU.
# Everything goes to OUT_DIR/gpu-results.md (and is printed), whatever fails along the way.
set -uo pipefail
DATA=${1:?Multi30k folder}
OUT=${2:?output folder}
mkdir -p "$OUT"
RESULTS="$OUT/gpu-results.md"
{ echo "## gpu_check.sh, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; echo;
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/- GPU: /';
  python -c "import torch; print(f'- torch {torch.__version__}, CUDA {torch.version.cuda}')"; echo; } > "$RESULTS"

start=$SECONDS
python -m pytest -q -m cuda tests/test_cuda.py > "$OUT/cuda-tests.txt" 2>&1
{ echo "### CUDA tests ($((SECONDS - start)) s, exit $?)"; echo; echo '```'; tail -15 "$OUT/cuda-tests.txt"; echo '```'; echo; } >> "$RESULTS"

start=$SECONDS
python -m mt_cli train --train-src "$DATA/train.de" --train-tgt "$DATA/train.en" --valid-src "$DATA/val.de" \
  --valid-tgt "$DATA/val.en" --preset base --device cuda --batch-tokens auto --max-minutes 2 --out "$OUT/bf16" \
  --cache "$OUT/cache" --set train.amp=bf16 --set train.valid_every=1000000 --set train.log_every=10 \
  --set decode.beam=1 > "$OUT/bf16.txt" 2>&1
echo "### base preset, bf16, 2 minutes ($((SECONDS - start)) s with setup, exit $?)" >> "$RESULTS"
python - "$OUT" >> "$RESULTS" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
log = out / "bf16" / "log.jsonl"
entries = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
train = [e for e in entries if "tokens_per_s" in e]
train = train[1:] or train  # the first window holds warm-up, when there is more than one
print()
if not train:
    print(f"no training window was logged; see {out / 'bf16.txt'}")
else:
    print("| steps | windows | median tgt tok/s | median MFU |\n|---|---|---|---|")
    print(f"| {train[-1]['step']} | {len(train)} | {statistics.median(e['tokens_per_s'] for e in train):,.0f} | "
          f"{100 * statistics.median(e['mfu'] for e in train):.1f}% |")
print()
print("```\n" + "\n".join((out / "bf16.txt").read_text().splitlines()[-6:]) + "\n```")
PY
cat "$RESULTS"
