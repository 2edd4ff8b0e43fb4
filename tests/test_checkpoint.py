import pytest
import torch

from conftest import tiny_config
from mt_cli.config import Config
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import BOS, PAD
from mt_cli.errors import MtError
from mt_cli.model import checkpoint


def _save(tmp_path, model, tokenizer, name="model.pt"):
    path = tmp_path / name
    cfg = Config(model=model.cfg)
    checkpoint.save(path, checkpoint.Checkpoint(cfg, tokenizer, model.state_dict(), None))
    return path


def test_save_then_load_gives_identical_outputs(tiny_model, tokenizer, tmp_path):
    path = _save(tmp_path, tiny_model, tokenizer)
    loaded = checkpoint.load(path)
    model = loaded.build_model()
    src = pad(tokenizer.encode_src(["Ein hund läuft.", "Der mann sieht ein haus."]))
    tgt = pad(
        [[BOS] + ids for ids in tokenizer.encode_tgt(["A dog runs.", "The man sees a house."])]
    )
    with torch.no_grad():
        assert torch.equal(tiny_model(src, tgt), model(src, tgt))
    assert loaded.config.model == tiny_model.cfg
    assert loaded.tokenizer.encode_src(["Ein hund."]) == tokenizer.encode_src(["Ein hund."])


def test_a_text_file_is_not_taken_for_a_checkpoint(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(MtError, match="notes.txt: not an mt checkpoint"):
        checkpoint.load(path)


def test_a_truncated_checkpoint_gets_a_clear_error(tiny_model, tokenizer, tmp_path):
    path = _save(tmp_path, tiny_model, tokenizer)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MtError, match="model.pt: not a readable mt checkpoint"):
        checkpoint.load(path)


class Payload:
    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_checkpoint_carrying_a_pickle_payload_is_refused_and_the_payload_never_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    payload = Payload()
    payload.marker = str(marker)
    path = tmp_path / "evil.pt"
    torch.save({"format": 1, "model": {}, "x": payload}, path)
    with pytest.raises(MtError, match="refused"):
        checkpoint.load(path)
    assert not marker.exists()
    # The payload is live: a plain unpickler runs it, so the refusal above is what kept it from
    # running.
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_a_checkpoint_from_a_newer_format_is_refused(tiny_model, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 99)
    path = _save(tmp_path, tiny_model, tokenizer)
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 1)
    with pytest.raises(MtError, match="format 99 is newer"):
        checkpoint.load(path)


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(MtError, match="nope.pt: checkpoint not found"):
        checkpoint.load(tmp_path / "nope.pt")


def test_saving_over_a_checkpoint_is_atomic_no_temporary_files_remain(
    tiny_model, tokenizer, tmp_path
):
    _save(tmp_path, tiny_model, tokenizer)
    _save(tmp_path, tiny_model, tokenizer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_a_saved_file_gets_the_permissions_of_any_new_file_not_owner_only(
    tiny_model, tokenizer, tmp_path
):
    import os
    import stat

    (tmp_path / "plain").write_text("")  # what open() gives under this process's umask
    want = stat.S_IMODE(os.stat(tmp_path / "plain").st_mode)
    assert stat.S_IMODE(os.stat(_save(tmp_path, tiny_model, tokenizer)).st_mode) == want


def test_model_config_round_trips_through_the_checkpoint(tokenizer, tmp_path):
    from mt_cli.model.transformer import build_model

    model = build_model(tiny_config(tokenizer, pre_norm=True, tie_embeddings=False))
    loaded = checkpoint.load(_save(tmp_path, model, tokenizer))
    assert loaded.config.model.pre_norm and not loaded.config.model.tie_embeddings


def test_averaging_checkpoints_gives_the_elementwise_mean(tokenizer, tmp_path):
    from mt_cli.model.transformer import build_model

    models = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        models.append(build_model(tiny_config(tokenizer)))
    paths = [_save(tmp_path, m, tokenizer, f"m{i}.pt") for i, m in enumerate(models)]
    averaged = checkpoint.average(paths)
    for key, value in averaged.model_state.items():
        want = sum(m.state_dict()[key] for m in models) / 3
        torch.testing.assert_close(value, want, rtol=1e-6, atol=1e-7)
    assert averaged.build_model() is not None and averaged.train_state is None


def test_checkpoints_of_different_models_are_not_averaged(tokenizer, tmp_path):
    from mt_cli.model.transformer import build_model

    a = _save(tmp_path, build_model(tiny_config(tokenizer)), tokenizer, "a.pt")
    b = _save(tmp_path, build_model(tiny_config(tokenizer, ffn_dim=96)), tokenizer, "b.pt")
    with pytest.raises(MtError, match="b.pt: a different model"):
        checkpoint.average([a, b])


def test_a_format_1_checkpoint_keeps_decoding_from_bos(
    tiny_model, tokenizer, tmp_path, monkeypatch
):
    """Format-1 models were trained to start from BOS; loading them must not switch them to PAD."""
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 1)
    path = _save(tmp_path, tiny_model, tokenizer)
    monkeypatch.undo()
    payload = torch.load(path, weights_only=True)
    del payload["config"]["model"]["decoder_start"]  # format-1 files never had the field
    torch.save(payload, path)
    loaded = checkpoint.load(path)
    assert loaded.config.model.decoder_start == "bos"
    assert loaded.build_model().start_token == BOS


def test_decoding_starts_from_a_zero_vector_even_when_the_tied_pad_row_has_learnt_something(
    tiny_model,
):
    assert tiny_model.cfg.decoder_start == "pad" and tiny_model.start_token == PAD
    emb = tiny_model.decoder.embeddings
    with torch.no_grad():
        emb.token.weight[PAD] = 1.0  # the output layer shares this row, so training may move it
        start = emb(torch.tensor([[PAD]]))
    # position 0 alone: the token part is zero
    torch.testing.assert_close(start[0, 0], emb.positions[0])


def test_a_full_disk_during_a_save_gives_a_clear_error_and_the_earlier_checkpoint_survives(
    tiny_model, tokenizer, tmp_path, monkeypatch
):
    import errno

    import mt_cli.files

    path = _save(tmp_path, tiny_model, tokenizer)
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mt_cli.files.os, "fsync", full)
    with torch.no_grad():
        # a different model, so a half-write would show
        tiny_model.output_projection.weight.add_(1.0)
    with pytest.raises(
        MtError, match=r"model\.pt: write failed \(No space left on device\); the previous file"
    ):
        _save(tmp_path, tiny_model, tokenizer)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_an_unwritable_folder_gives_a_clear_error(tiny_model, tokenizer, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(MtError, match=r"not-a-folder/run/model\.pt: cannot write here"):
        _save(tmp_path / "not-a-folder" / "run", tiny_model, tokenizer)
