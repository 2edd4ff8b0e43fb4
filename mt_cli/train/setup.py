"""Everything a run works with, gathered once: its paths, context, tokenizer, data, model and
optimizer, with the run's own last.pt resumed when there is one."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import Config, TrainConfig, to_yaml
from mt_cli.data.cache import TokenCorpus
from mt_cli.data.lexicon import build_lexicon, pair_chunks
from mt_cli.data.mixture import MixedCorpus
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.decode.shortlist import Shortlist
from mt_cli.device import amp_dtype, set_threads
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.model import checkpoint
from mt_cli.model.checkpoint import Checkpoint
from mt_cli.model.loss import TranslationLoss
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.train import distributed as ddp
from mt_cli.train.context import RunContext, TrainPaths
from mt_cli.train.corpora import ValidSet, load_corpora
from mt_cli.train.distributed import Dist
from mt_cli.train.hardware import resolve_amp, resolve_batch_tokens, resolve_compile
from mt_cli.train.inputs import (
    Log,
    check_first,
    get_tokenizer,
    wait_for_path,
)
from mt_cli.train.run_info import write_run_info
from mt_cli.train.shrink import shrink, spaced
from mt_cli.train.state import (
    TrainState,
    check_data,
    clear_leftovers,
    make_checkpoint,
    resume,
    rng_state,
    trim_log,
)
from mt_cli.train.throughput import peak_flops
from mt_cli.train.trained_languages import model_config


@dataclass
class Run:
    """Everything one training run works with, gathered once by `prepare`: the frozen context and
    the live objects (model, optimizer, state) that training changes."""

    ctx: RunContext
    amp: torch.dtype | None  # autocast dtype, None for fp32
    scaler: torch.amp.GradScaler  # active for fp16 only; a no-op otherwise
    peak_flops: float  # the device's peak for the precision trained in, for MFU in the log
    tokenizer: Tokenizer
    model: Transformer
    # TranslationLoss(model): maybe compiled, and under torchrun in DistributedDataParallel
    objective: Any
    optimizer: torch.optim.Optimizer
    ema: Transformer | None  # the moving average of the weights, when train.ema_decay > 0
    train_data: TokenCorpus | MixedCorpus  # one direction's, or several mixed
    valid: list[ValidSet]  # one per direction
    state: TrainState
    # built from the training pairs; in every checkpoint and validation
    shortlist: Shortlist | None = None

    @property
    def cfg(self) -> Config:
        return self.ctx.cfg

    @property
    def paths(self) -> TrainPaths:
        return self.ctx.paths

    @property
    def dist(self) -> Dist:
        return self.ctx.dist

    @property
    def device(self) -> torch.device:
        return self.ctx.device

    def weights(self, model: torch.nn.Module) -> Checkpoint:
        """A checkpoint of `model`'s weights as the run has them (best.pt, step<N>.pt)."""
        return make_checkpoint(self.cfg, self.tokenizer, model, shortlist=self.shortlist)

    def resumable(self) -> Checkpoint | None:
        """last.pt: everything the next step depends on. Every rank calls it (each hands in its RNG
        states under torchrun); rank 0 gets the checkpoint to save, the others None."""
        rngs = ddp.gather(rng_state(), self.dist)
        if not self.dist.main:
            return None
        return make_checkpoint(
            self.cfg,
            self.tokenizer,
            self.model,
            self.optimizer,
            self.state,
            self.ema,
            rngs,
            self.scaler,
            self.shortlist,
        )


def make_optimizer(
    model: torch.nn.Module, t: TrainConfig, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW; weight decay, when on, applies to weight matrices only, not to biases and LayerNorm
    weights (as nanoGPT's configure_optimizers does): shrinking those towards 0 only hurts."""
    params = list(model.parameters())
    groups: list[dict] = [{"params": params}]
    if t.weight_decay > 0:  # one group otherwise, the layout of runs that never decayed
        groups = [
            {"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
    # The fused kernel: one pass over all parameters instead of a loop over tensors.
    return torch.optim.AdamW(
        groups,
        lr=t.lr,
        betas=t.adam_betas,
        eps=t.adam_eps,
        weight_decay=t.weight_decay,
        fused=device.type in ("cpu", "cuda"),
    )


def _start(ctx: RunContext) -> None:
    """The run folder: made, cleared of killed saves' leftovers, and the data checked (rank 0)."""
    out, log = ctx.paths.out, ctx.log
    if not ctx.dist.main:
        wait_for_path(out, "run folder", ctx.dist)
        return
    out.mkdir(parents=True, exist_ok=True)
    if cleared := clear_leftovers(out):
        log(f"{out}: removed {cleared} temporary file(s) left by an interrupted save")
    if ctx.cfg.train.doctor:
        check_first(ctx.data.sources(), log)


def prepare(given: RunContext) -> Run:
    """Tokenizer, data, model and optimizer; the run's own last.pt is resumed when there is one.
    The run gets the context resolved: the model sized to the tokenizer (or train.init's), the
    batch size of train.batch_tokens auto probed (or taken from last.pt)."""
    t, d, log, device = given.cfg.train, given.dist, given.log, given.device
    set_threads(t.threads)
    _start(given)
    sources = given.data.sources()
    init = _init_checkpoint(given)
    if init is not None:
        tokenizer = init.tokenizer
    else:
        tokenizer = get_tokenizer(given.data, given.paths.tokenizer, given.cfg, log, d)
    shape = model_config(given.cfg, init, tokenizer, given.data)
    ctx = replace(given, cfg=replace(given.cfg, model=shape))
    # sha256 of each file, read once
    fingerprints = {role: s.fingerprint() for role, s in sources.items()}
    train_data, valid = load_corpora(given.data, fingerprints, tokenizer, given.cfg, log, d)
    model = _model(ctx, init)
    optimizer = make_optimizer(model, t, device)
    ema = copy.deepcopy(model).requires_grad_(False) if t.ema_decay > 0 else None
    amp = amp_dtype(t.amp, device)
    # fp16 gradients underflow without it
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)
    last = ctx.paths.last
    state = TrainState()
    if last.is_file():
        state = resume(last, ctx.cfg, model, optimizer, ema, log, d.rank, d.world, scaler)
    described = {r: s.describe() for r, s in sources.items()}
    state.data = check_data(fingerprints, state.data, described, last)
    objective: torch.nn.Module = TranslationLoss(model, t.label_smoothing, t.rdrop)
    ctx = replace(ctx, cfg=resolve_batch_tokens(ctx, state, objective, amp, train_data))
    amp = resolve_amp(ctx, state, objective, amp, train_data, model.start_token)
    if d.main:
        if dropped := trim_log(ctx.paths.log, state.step):
            log(f"{ctx.paths.log}: dropped {dropped} entries past step {state.step}, to be redone")
        atomic_write_text(ctx.paths.config, to_yaml(ctx.cfg))
        write_run_info(ctx, fingerprints, train_data, valid, amp)
    objective = _wrapped(ctx, resolve_compile(ctx, state, objective, amp, train_data))
    peak = _announce(ctx, model, amp)
    shortlist = _shortlist(t, train_data, tokenizer, log, init) if d.main else None
    return Run(
        ctx,
        amp,
        scaler,
        peak,
        tokenizer,
        model,
        objective,
        optimizer,
        ema,
        train_data,
        valid,
        state,
        shortlist,
    )


def _model(ctx: RunContext, init: Checkpoint | None) -> Transformer:
    """The model of the resolved shape on its device: train.init's weights when fine-tuning (a
    resumed run then loads last.pt's), with the parts train.freeze_* keep fixed."""
    t, d = ctx.cfg.train, ctx.dist
    random.seed(t.seed)
    torch.manual_seed(t.seed)
    model = build_model(ctx.cfg.model)
    if init is not None:
        model.load_state_dict(init.model_state)
    model = freeze(model, t).to(ctx.device)
    if d.rank > 0:  # the same initial weights everywhere, then each rank its own dropout masks
        torch.manual_seed(t.seed * 1000 + d.rank)
    return model


def _announce(ctx: RunContext, model: Transformer, amp: torch.dtype | None) -> float:
    """Say what trains where; the device's peak FLOP/s the log's MFU is measured against."""
    d = ctx.dist
    n_params = sum(p.numel() for p in model.parameters())
    where = f" x {d.world} processes" if d.active else ""
    autocast = f" with {amp} autocast" if amp else ""
    ctx.log(f"model: {n_params / 1e6:.1f}M parameters on {ctx.device}{where}{autocast}")
    peak, source = peak_flops(ctx.device, amp is not None)
    ctx.log(f"MFU is against {peak / 1e12:.2f} TFLOP/s ({source})")
    return peak


def _shortlist(
    t: TrainConfig,
    data: TokenCorpus | MixedCorpus,
    tokenizer: Tokenizer,
    log: Log,
    init: Checkpoint | None,
) -> Shortlist | None:
    """The vocabulary shortlist of train.shortlist_*, counted over the training pairs (rebuilt
    the same on resume: it depends on the data and the sizes only); a fine-tuning run keeps
    train.init's, made from the data the model learned first (an imported student's came with
    it): one counted over a few hundred fine-tuning pairs cut its output to their pieces."""
    if t.shortlist_per_source == 0:
        return None
    if init is not None and init.shortlist is not None:
        log(f"vocabulary shortlist: {t.init}'s")
        return Shortlist.from_state(init.shortlist, str(t.init))
    log(f"vocabulary shortlist: counting {len(data)} training pairs")
    lexicon = build_lexicon(
        pair_chunks(data),
        tokenizer.src_vocab_size,
        tokenizer.tgt_vocab_size,
        t.shortlist_per_source,
        t.shortlist_frequent,
    )
    return Shortlist.of(lexicon)


def _init_checkpoint(ctx: RunContext) -> Checkpoint | None:
    """train.init's checkpoint: the model, weights and tokenizer a fine-tuning run starts from."""
    t = ctx.cfg.train
    if not t.init:
        if t.freeze_embeddings or t.freeze_encoder:
            raise MtError(
                "train.freeze_embeddings and train.freeze_encoder fine-tune a model: give "
                "train.init CKPT"
            )
        return None
    if ctx.data.tokenizer is not None:
        raise MtError("train.init brings its checkpoint's tokenizer: give no tokenizer of its own")
    ckpt = checkpoint.load(Path(t.init))
    m = ckpt.config.model
    kept = ""
    if t.init_layers:
        ckpt = shrink(ckpt, t.init_layers, t.init)
        kept = (
            f", keeping {t.init_layers} of them (encoder "
            f"{spaced(m.enc_layers, ckpt.config.model.enc_layers)}, "
        )
        kept += f"decoder {spaced(m.dec_layers, ckpt.config.model.dec_layers)})"
    ctx.log(
        f"fine-tuning {t.init}: its model ({m.d_model}-d, {m.enc_layers}+{m.dec_layers} "
        f"layers{kept}), weights and"
        " tokenizer; optimizer and schedule start fresh"
    )
    return ckpt


def freeze(model: Transformer, t: TrainConfig) -> Transformer:
    """Fix the parts fine-tuning keeps: no gradient, so AdamW leaves them as they are."""
    if t.freeze_embeddings:
        model.encoder.embeddings.requires_grad_(False)
        model.decoder.embeddings.requires_grad_(False)  # and the output layer's weight, tied to it
    if t.freeze_encoder:
        model.encoder.requires_grad_(False)
    return model


def _wrapped(ctx: RunContext, objective: torch.nn.Module) -> torch.nn.Module:
    """The objective as it runs: under DistributedDataParallel with torchrun."""
    if ctx.dist.active:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        objective = torch.nn.parallel.DistributedDataParallel(objective, device_ids=ids)
    return objective
