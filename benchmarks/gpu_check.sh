#!/usr/bin/env bash
# The one prepared GPU check, for a session that has the device machine. One command, about 8 minutes
# with every part (name fewer PARTS to fit what is left of the lease):
#   bash benchmarks/gpu_check.sh DATA_DIR OUT_DIR [PARTS]
# DATA_DIR holds Multi30k train.{de,en} and val.{de,en}. The device machine sees only the working
# tree, so copy them into the git-ignored data/multi30k/ and carry that path, e.g.
#   run(command="bash benchmarks/gpu_check.sh data/multi30k $OUT/gpu", carry=["data/multi30k"])
# 1. the CUDA tests (tests/test_cuda.py alone, so that the serving and export tests' packages need not
#    be there: bf16/fp16 steps, fused attention, the batch probe, NCCL when
#    two GPUs exist, bitwise resume under --deterministic, decoding parity with the CPU);
# 2. the base preset, bf16 autocast, --batch-tokens auto, 2 minutes: tokens/s and MFU;
# 3. the compiled training step against the eager one (benchmarks/train_compile.py), base, bf16;
# 3b. mt's step beside MarianMTModel's, base and big presets, bf16, the same batches and optimizer,
#    each in its own process (benchmarks/train_peers.py; needs transformers there);
# 4. where a step's time goes: torch.profiler over 20 base-preset steps (benchmarks/train_profile.py):
#    the top 15 kernels and the GPU's idle time between them.
# PARTS (default: all) picks some: tests, train, compile, peers, profile. Everything goes to
# OUT_DIR/gpu-results.md (and is printed), whatever fails along the way.
set -uo pipefail
DATA=${1:?Multi30k folder}
OUT=${2:?output folder}
PARTS=${3:-tests train compile peers profile}
want() { [[ " $PARTS " == *" $1 "* ]]; }
mkdir -p "$OUT"
RESULTS="$OUT/gpu-results.md"
{ echo "## gpu_check.sh, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; echo;
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/- GPU: /';
  python -c "import torch; print(f'- torch {torch.__version__}, CUDA {torch.version.cuda}')"; echo; } > "$RESULTS"

if want tests; then
start=$SECONDS
python -m pytest -q -m cuda tests/test_cuda.py > "$OUT/cuda-tests.txt" 2>&1
{ echo "### CUDA tests ($((SECONDS - start)) s, exit $?)"; echo; echo '```'; tail -15 "$OUT/cuda-tests.txt"; echo '```'; echo; } >> "$RESULTS"
fi

if want train; then
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
fi

if want compile; then
  start=$SECONDS
  python benchmarks/train_compile.py --data "$DATA" --work "$OUT/work" --device cuda --preset base --amp bf16 \
    --batch-tokens 65536 --steps 60 --no-append > "$OUT/compile.txt" 2>&1
  { echo "### compiled against eager ($((SECONDS - start)) s, exit $?)"; echo; sed -n '/^NVIDIA\|^|/,$p' "$OUT/compile.txt" | tail -12; echo; } >> "$RESULTS"
fi
if want peers; then
  for preset in base big; do
    start=$SECONDS
    python benchmarks/train_peers.py --data "$DATA" --work "$OUT/work" --device cuda --preset $preset --amp bf16 \
      --batch-tokens 65536 --steps 20 --rounds 2 --no-append > "$OUT/peers-$preset.txt" 2>&1
    { echo "### $preset beside MarianMTModel ($((SECONDS - start)) s, exit $?)"; echo; sed -n '/^NVIDIA\|^|/,$p' "$OUT/peers-$preset.txt" | tail -8; echo; } >> "$RESULTS"
  done
fi
if want profile; then
  start=$SECONDS
  python benchmarks/train_profile.py --data "$DATA" --work "$OUT/work" --device cuda --preset base --amp bf16 \
    --steps 20 --no-append > "$OUT/profile.txt" 2>&1
  { echo "### where a step's time goes ($((SECONDS - start)) s, exit $?)"; echo; tail -30 "$OUT/profile.txt"; echo; } >> "$RESULTS"
fi
cat "$RESULTS"
