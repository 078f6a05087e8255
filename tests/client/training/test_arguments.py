"""The examples' command line: flags and the training YAML into a validated run config."""

from __future__ import annotations

import argparse

import pytest

from graphstore.client.training import (
    EmbeddingConfig,
    RGCNConfig,
    TrainConfig,
    add_common_arguments,
    add_embedding_arguments,
    add_rgcn_arguments,
    argument_parser,
    build_config,
    config_from_args,
    parse_int_list,
)


def make_parser(embedding: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train")
    add_common_arguments(parser)
    if embedding:
        add_embedding_arguments(parser)
    else:
        parser.add_argument("--model")
    return parser


def config_of(argv: list[str], config_cls=TrainConfig, embedding: bool = False):
    return build_config(config_cls, make_parser(embedding).parse_args(argv))


def test_flags_set_their_settings_and_the_rest_keep_the_defaults():
    config = config_of(
        ["--graph-name", "g", "--fanouts", "5, 10", "--eval-fanouts", "3,4", "--batch-size", "64"]
        + ["--lr", "0.5", "--amp", "bf16", "--model", "sage", "--save-model", ""]
    )
    assert config.graph_name == "g"
    assert config.fanouts == [5, 10] and config.eval_fanouts == [3, 4]
    assert config.batch_size == 64 and config.lr == 0.5 and config.amp == "bf16"
    assert config.save_model == ""  # '' (skip saving) is a value, not "not given"
    assert config.hidden == TrainConfig.hidden and config.epochs == TrainConfig.epochs


def test_flags_override_the_yaml_which_overrides_the_defaults(tmp_path):
    yaml_path = tmp_path / "train.yaml"
    yaml_path.write_text("graph-name: from-yaml\nbatch-size: 32\nhidden: 16\nfanouts: '4,4'\nepochs: 3\n")
    config = config_of(["--config", str(yaml_path), "--hidden", "8", "--graph-name", "g"])
    assert config.graph_name == "g" and config.hidden == 8  # flags win
    assert config.batch_size == 32 and config.epochs == 3 and config.fanouts == [4, 4]  # the YAML
    assert config.dropout == TrainConfig.dropout  # the default


@pytest.mark.parametrize(("value", "expected"), [("true", "bf16"), ("false", "none")])
def test_the_older_boolean_amp_spelling_still_reads(tmp_path, value, expected):
    yaml_path = tmp_path / "train.yaml"
    yaml_path.write_text(f"graph_name: g\namp: {value}\n")
    assert config_of(["--config", str(yaml_path)]).amp == expected


def test_an_unknown_yaml_setting_is_named(tmp_path):
    yaml_path = tmp_path / "train.yaml"
    yaml_path.write_text("graph_name: g\nbatch_sise: 32\n")
    with pytest.raises(ValueError, match="unknown setting 'batch_sise'"):
        config_of(["--config", str(yaml_path)])


def test_a_yaml_that_is_not_a_mapping_is_refused(tmp_path):
    yaml_path = tmp_path / "train.yaml"
    yaml_path.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="must be a mapping, got list"):
        config_of(["--config", str(yaml_path)])


def test_a_missing_yaml_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        config_of(["--config", str(tmp_path / "missing.yaml"), "--graph-name", "g"])


def test_an_invalid_setting_ends_the_script_with_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        config_from_args(make_parser(), TrainConfig, ["--graph-name", "g", "--fanouts", "5", "--layers", "2"])
    assert exited.value.code == 2
    assert "layers (2) must equal the number of fanouts [5]" in capsys.readouterr().err


def test_a_missing_partition_config_ends_the_script_with_one_line(tmp_path, capsys):
    missing = str(tmp_path / "cora.json")
    with pytest.raises(SystemExit) as exited:
        config_from_args(make_parser(), TrainConfig, ["--graph-name", "g", "--part-config", missing])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(err) == 1
    assert "--part-config" in err[0] and missing in err[0] and "no such file" in err[0]


def test_config_from_args_returns_the_validated_config():
    config = config_from_args(make_parser(), TrainConfig, ["--graph-name", "g", "--model", "mlp"])
    assert isinstance(config, TrainConfig) and config.model == "mlp"


def test_embedding_flags_fill_the_embedding_config(tmp_path):
    config = config_of(
        ["--graph-name", "g", "--emb-dim", "16", "--sparse-lr", "0.2", "--freeze-embeddings"],
        EmbeddingConfig,
        embedding=True,
    )
    assert isinstance(config, EmbeddingConfig)
    assert (config.emb_dim, config.sparse_lr, config.freeze_embeddings) == (16, 0.2, True)
    # An absent --freeze-embeddings leaves the YAML's value alone.
    yaml_path = tmp_path / "emb.yaml"
    yaml_path.write_text("graph_name: g\nfreeze_embeddings: true\n")
    assert config_of(["--config", str(yaml_path)], EmbeddingConfig, embedding=True).freeze_embeddings
    assert not config_of(["--graph-name", "g"], EmbeddingConfig, embedding=True).freeze_embeddings


def test_parse_int_list():
    assert parse_int_list("10, 25") == [10, 25]
    assert parse_int_list("-1") == [-1]
    with pytest.raises(ValueError):
        parse_int_list("10,x")


def test_the_script_parser_has_every_common_flag_and_the_docstrings_first_line():
    parser = argument_parser("\nTrain a model.\n\nMore words.\n")
    assert parser.description == "Train a model."
    args = parser.parse_args(["--graph-name", "g", "--num-threads", "3", "--eval-mode", "layerwise"])
    assert (args.graph_name, args.num_threads, args.eval_mode) == ("g", 3, "layerwise")


def test_the_rgcn_yaml_in_the_repo_and_the_rgcn_flags_fill_the_rgcn_config():
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="train_rgcn")
    add_common_arguments(parser)
    add_rgcn_arguments(parser)
    yaml_path = Path(__file__).parents[3] / "configs" / "train-rgcn.yaml"
    argv = ["--config", str(yaml_path), "--graph-name", "mag", "--num-bases", "2", "--model", "mlp"]
    config = build_config(RGCNConfig, parser.parse_args(argv))
    assert isinstance(config, RGCNConfig) and config.target_ntype == "paper"
    assert (config.model, config.num_bases, config.regularizer, config.fanouts) == (
        "mlp",
        2,
        "basis",
        [10, 10],
    )
