"""The end of a run, which leaves best.pt as the validated choice: the average of the last
checkpoints when it validates at least as well as the best single step (train.average_last),
with the beam size and length penalty that did best on the validation set as its decoding
defaults (train.tune_beams, train.tune_length_penalties), int8 decoding on a CPU where it keeps
fp32's validation BLEU (train.tune_precision), and its decoder step compiled for this CPU after a
long run (train.compile_after_minutes). `mt translate --checkpoint RUN/best.pt` then decodes as
the recipe was measured, on the fastest path that keeps its quality. Runs on the
main process only; rerunning a finished run's command redoes it and gives the same best.pt.
"""

from __future__ import annotations

from mt_cli.decode.compiled import compile_or_say
from mt_cli.decode.translator import Translator
from mt_cli.decode.tuning import precision_verdict, tune_grid, tune_precision, with_decoding
from mt_cli.device import cpu_has_int8
from mt_cli.model import checkpoint
from mt_cli.train.inputs import Log
from mt_cli.train.progress import Record
from mt_cli.train.setup import Run
from mt_cli.train.validation import validate_all


def finish(run: Run, record: Record, log: Log) -> None:
    t = run.cfg.train
    if t.average_last:
        average_last(run, record, log)
    if t.tune_beams or t.tune_length_penalties:
        tune_best(run, record, log)
    if t.tune_precision:
        check_int8(run, record, log)
    compile_best(run, log)


def average_last(run: Run, record: Record, log: Log) -> None:
    """Average the last `average_last` numbered checkpoints into RUN/averaged.pt and validate it;
    best.pt takes it when its BLEU is at least the best single step's."""
    paths = run.paths.numbered()[-run.cfg.train.average_last :]
    if len(paths) < 2:
        log(f"not averaging: only {len(paths)} numbered checkpoint(s) in {run.paths.out}")
        return
    averaged = checkpoint.average(paths)
    checkpoint.save(run.paths.averaged, averaged)
    model = averaged.build_model(run.device)
    v = validate_all(model, run.tokenizer, run.valid, run.cfg, run.device, run.amp, run.shortlist)
    best = run.state.best_bleu
    chosen = v.bleu >= best
    record(
        {
            "step": run.state.step,
            "averaged": [p.name for p in paths],
            "valid_loss": v.loss,
            "valid_bleu": v.bleu,
            "chosen": chosen,
        }
    )
    verdict = "best.pt takes it" if chosen else "best.pt keeps the single step"
    log(
        f"averaged {len(paths)} checkpoints into {run.paths.averaged}: valid BLEU {v.bleu:.2f}"
        f" (best single step: {best:.2f}); {verdict}"
    )
    if chosen:
        current = checkpoint.load(run.paths.best)
        # a rerun must not overwrite the step with an average
        if not (current.origin or {}).get("averaged"):
            checkpoint.save(run.paths.best_step, current)
        checkpoint.save(run.paths.best, averaged)


def tune_best(run: Run, record: Record, log: Log) -> None:
    """Decode the validation set with every beam x length penalty of the config and write the
    best pair into best.pt's decoding defaults."""
    t, d = run.cfg.train, run.cfg.decode
    beams, penalties = t.tune_beams or (d.beam,), t.tune_length_penalties or (d.length_penalty,)
    ckpt = checkpoint.load(run.paths.best)
    translator = Translator.from_checkpoint(ckpt, str(run.device))
    rows = tune_grid(
        translator, [(s.pairs.src, s.refs, s.start) for s in run.valid], beams, penalties
    )
    ckpt.config = with_decoding(
        ckpt.config, beam=rows[0]["beam"], length_penalty=rows[0]["length_penalty"]
    )
    checkpoint.save(run.paths.best, ckpt)
    record({"step": run.state.step, "tuned": rows})
    top = ", ".join(
        f"beam {r['beam']} lp {r['length_penalty']:g}: {r['bleu']:.2f}" for r in rows[:3]
    )
    settings = f"{len(rows)} settings"
    log(f"tuned decoding on the validation set ({settings}): {top}; best.pt decodes with the first")


def check_int8(run: Run, record: Record, log: Log) -> None:
    """Translate the validation set with best.pt in int8 and in fp32 on the CPU, and record in its
    decoding defaults the precision it then runs: auto (int8 on a CPU with VNNI or AMX) or fp32.
    On a CPU without int8 arithmetic the check is skipped (int8 decoding runs 10x slower than fp32
    there, minutes for a validation set) and fp32 recorded: auto never picks int8 there anyway."""
    ckpt = checkpoint.load(run.paths.best)
    if ckpt.config.decode.precision not in ("auto", "int8"):
        log(
            f"int8 not checked: best.pt decodes in {ckpt.config.decode.precision} "
            "(decode.precision)"
        )
        return
    if not cpu_has_int8():
        ckpt.config = with_decoding(ckpt.config, precision="fp32")
        checkpoint.save(run.paths.best, ckpt)
        log(
            "int8 not checked: this CPU has no int8 arithmetic (VNNI or AMX), so best.pt decodes "
            "in fp32; on one that has it, `mt tune-precision --checkpoint best.pt --src VALID.src "
            "--ref VALID.ref --out best.pt` checks int8"
        )
        return
    sets = [(s.pairs.src, s.refs, s.start) for s in run.valid]
    row = tune_precision(ckpt, sets, run.cfg.train.int8_tolerance)
    ckpt.config = with_decoding(ckpt.config, precision=row["precision"])
    checkpoint.save(run.paths.best, ckpt)
    record({"step": run.state.step, "int8_checked": row})
    log(precision_verdict(row, "best.pt", "valid"))


def compile_best(run: Run, log: Log) -> None:
    """After a run of at least train.compile_after_minutes, best.pt's decoder step compiled for this
    CPU in the precision it decodes in: half a minute once, for every translation after it."""
    threshold, minutes = run.cfg.train.compile_after_minutes, run.state.elapsed_s / 60
    if not threshold or minutes < threshold:
        return
    compile_or_say(run.paths.best, "best.pt's", log)
