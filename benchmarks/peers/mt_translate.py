"""Translate a file with mt's Python API in a clean process, timing the load and the decoding apart:
the mt side of benchmarks/distill.py's speed columns (ct2_translate.py is CTranslate2's).

    python benchmarks/peers/mt_translate.py CHECKPOINT SRC OUT

Imports mt_cli (and so torch) only. The checkpoint's own decoding settings, as `mt translate` uses
them; its compiled step when `mt compile` built one. Prints {"load_s": ..., "decode_s": ...}.
"""

import json
import sys
import time

start = time.perf_counter()
from mt_cli import Translator  # noqa: E402 (timed as part of the load)

tr = Translator.load(sys.argv[1], device="cpu")
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().splitlines()
loaded = time.perf_counter()
out = tr.translate(lines)
done = time.perf_counter()
with open(sys.argv[3], "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in out))
print(json.dumps({"load_s": loaded - start, "decode_s": done - loaded}))
