"""A smaller model started from a bigger one of the same width: keep some of its layers, evenly
spaced, with its embeddings and output layer (shrink and fine-tune, Shleifer & Rush 2020). A
student of a distilled corpus then begins where its teacher's representations are, not at random,
and needs far fewer updates to come close to it."""

from __future__ import annotations

from dataclasses import replace

from mt_cli.errors import MtError
from mt_cli.model.checkpoint import Checkpoint


def spaced(have: int, keep: int) -> list[int]:
    """`keep` of `have` layers, evenly spaced with the first and the last among them (one: the
    first, which sits on the embeddings it was trained with): 2 of 4 -> [0, 3], 3 of 4 -> [0, 2, 3].
    """
    if keep == 1:
        return [0]
    return [round(i * (have - 1) / (keep - 1)) for i in range(keep)]


def shrink(ckpt: Checkpoint, layers: str, name: str) -> Checkpoint:
    """`ckpt` with only ENC+DEC (`layers`, as train.init_layers gives them) of its layers,
    renumbered from 0; everything else (embeddings, output layer, final norms, tokenizer) as it was.
    """
    enc, dec = (int(n) for n in layers.split("+"))
    m = ckpt.config.model
    if enc > m.enc_layers or dec > m.dec_layers:
        raise MtError(
            f"train.init_layers {layers}: {name} has {m.enc_layers}+{m.dec_layers} layers; keep at "
            "most that many"
        )
    kept = {"encoder": spaced(m.enc_layers, enc), "decoder": spaced(m.dec_layers, dec)}
    state = {}
    for key, value in ckpt.model_state.items():
        stack, _, rest = key.partition(".")
        # encoder.layers.3.self_attn... -> encoder.layers.1...
        if stack in kept and rest.startswith("layers."):
            index, _, tail = rest.removeprefix("layers.").partition(".")
            if int(index) in kept[stack]:
                state[f"{stack}.layers.{kept[stack].index(int(index))}.{tail}"] = value
        else:
            state[key] = value
    model = replace(m, enc_layers=enc, dec_layers=dec)
    return replace(
        ckpt, config=replace(ckpt.config, model=model), model_state=state, train_state=None
    )
