from pathlib import Path

import pytest

from mt_cli.config import PRESETS, Config, build_config, from_dict, to_dict
from mt_cli.errors import MtError


def test_layers_apply_in_order_preset_yaml_options_then_set(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("preset: base\nmodel:\n  dropout: 0.2\ntrain:\n  lr: 0.0005\n  max_steps: 10\n")
    cfg = build_config(
        None, path, {"train": {"max_steps": 20}}, ["model.dropout=0", "decode.beam=4"]
    )
    assert cfg.model.d_model == 512 and cfg.model.enc_layers == 6
    assert cfg.model.dropout == 0.0
    assert cfg.train.lr == 0.0005 and cfg.train.max_steps == 20
    assert cfg.decode.beam == 4


def test_config_round_trips_through_a_plain_dict():
    cfg = build_config("tiny", sets=["train.adam_betas=[0.9, 0.99]"])
    assert from_dict(to_dict(cfg)) == cfg
    assert cfg.train.adam_betas == (0.9, 0.99)


@pytest.mark.parametrize(
    "item, message",
    [
        ("model.nope=1", "unknown field"),
        ("model.d_model=abc", "must be of type int"),
        ("model.d_model=250", "divisible by model.n_heads"),
        ("decode.beam=-1", "beam must be at least 1"),
        ("tokenizer.vocab_size=0", "vocab_size must be positive"),
        ("train.amp=fp8", "amp must be"),
        ("nodot", "expected SECTION.FIELD=VALUE"),
        ("model.pre_norm=1", "must be of type bool"),
        ("train.lr_schedule=linear", "lr_schedule must be inverse_sqrt, cosine or wsd"),
        ("train.lr_cooldown=0", "lr_cooldown must be in"),
        ("train.lr_schedule=cosine", "cosine needs a budget"),
    ],
)
def test_bad_overrides_get_clear_messages(item, message):
    with pytest.raises(MtError, match=message):
        build_config("small", sets=[item])


def test_unknown_preset_and_missing_yaml_are_clear(tmp_path):
    with pytest.raises(MtError, match="unknown preset 'huge'"):
        build_config("huge")
    with pytest.raises(MtError, match="config file not found"):
        build_config(None, tmp_path / "none.yaml")


def test_every_preset_builds():
    for name in PRESETS:
        assert isinstance(build_config(name), Config)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_preset_yaml_files_in_configs_equal_the_presets(name):
    path = Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml"
    assert build_config(None, path) == build_config(name)


def test_the_quickstart_trains_the_recipe_in_configs_multi30k_de_en_yaml():
    from mt_cli.tools.quickstart import RECIPE

    path = Path(__file__).resolve().parents[1] / "configs" / "multi30k-de-en.yaml"
    assert build_config(None, path) == build_config("small", options=RECIPE)


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")), ids=str
)
def test_every_shipped_config_file_builds(path):
    assert isinstance(build_config(None, path), Config)


def test_off_and_on_stay_words_in_yaml_and_set_while_true_and_false_are_booleans(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  amp: off\nmodel:\n  pre_norm: true\n")
    cfg = build_config("tiny", path)
    assert cfg.train.amp == "off" and cfg.model.pre_norm is True
    assert build_config("tiny", sets=["train.amp=off", "model.pre_norm=false"]).train.amp == "off"
    with pytest.raises(MtError, match=r"c\.yaml with the command-line options: train\.amp must be"):
        build_config("tiny", path, sets=["train.amp=3"])
