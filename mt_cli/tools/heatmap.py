"""Attention heat maps: the model's own attention probabilities for one sentence pair, every
layer and head, drawn as one figure per layer with a grid of heads.

The probabilities are what the model computed in its forward pass (decode/attention_maps.py records
them), not a re-derivation.
"""

from __future__ import annotations

import math
from pathlib import Path

from mt_cli.decode.attention_maps import AttentionMaps, record_attention
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.files import atomic_open

KINDS = {
    "encoder": "encoder self-attention",
    "decoder-self": "decoder self-attention (causal)",
    "decoder-cross": "encoder-decoder attention",
}


def draw(maps: AttentionMaps, out_dir: Path) -> list[Path]:
    """One PNG per kind and layer (e.g. decoder-cross-layer2.png), a grid of its heads in it."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    axes_of = {
        "encoder": (maps.src_pieces, maps.src_pieces),
        "decoder-self": (maps.tgt_pieces, maps.tgt_pieces),
        "decoder-cross": (maps.tgt_pieces, maps.src_pieces),
    }
    written = []
    for kind, per_layer in maps.maps.items():
        rows_label, cols_label = axes_of[kind]
        for layer, probs in enumerate(per_layer, start=1):
            heads = probs.size(0)
            ncols = min(4, heads)
            nrows = math.ceil(heads / ncols)
            cell_w, cell_h = (
                max(3.0, 0.28 * len(cols_label) + 1),
                max(3.0, 0.28 * len(rows_label) + 1),
            )
            fig = Figure(figsize=(ncols * cell_w, nrows * cell_h + 0.6), layout="constrained")
            fig.suptitle(f"{KINDS[kind]}, layer {layer}")
            for h in range(heads):
                ax = fig.add_subplot(nrows, ncols, h + 1)
                ax.imshow(
                    probs[h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto"
                )
                ax.set_title(f"head {h + 1}", fontsize=9)
                ax.set_xticks(range(len(cols_label)), cols_label, rotation=90, fontsize=7)
                ax.set_yticks(range(len(rows_label)), rows_label, fontsize=7)
            path = Path(out_dir) / f"{kind}-layer{layer}.png"
            with atomic_open(path, "wb") as f:
                fig.savefig(f, format="png", dpi=110)
            written.append(path)
    return written


def attention_figures(
    checkpoint_path: Path, src: str, tgt: str | None, out_dir: Path
) -> list[Path]:
    """`mt attention`: load a checkpoint, record its attention for src (-> tgt), draw every map."""
    if not src.strip():
        raise MtError("the source sentence is empty; give the sentence to look at")
    return draw(record_attention(Translator.load(checkpoint_path, device="cpu"), src, tgt), out_dir)
