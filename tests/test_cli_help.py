"""`flkit ... --help`: every option of every sub-command has help and shows its default; `flkit
run` prints the model it chose and says when a result comes from the cache."""

from __future__ import annotations

import argparse
import re

import pytest

from flkit.cli import DEFAULT_MODELS, build_parser
from flkit.cli import main as cli_main
from flkit.data import DATASETS
from flkit.models import MODELS


def _parsers(parser, path=("flkit",)):
    """(command path, parser) for the parser and every sub-command below it."""
    yield path, parser
    for action in parser._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _options(parser):
    for action in parser._actions:
        if isinstance(
            action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
        ):
            continue
        yield action


COMMANDS = {" ".join(path): p for path, p in _parsers(build_parser())}


def test_every_sub_command_is_walked():
    assert {"flkit run", "flkit data list", "flkit data link", "flkit reproduce"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_has_help_and_a_default(command):
    parser = COMMANDS[command]
    text = re.sub(r"\s+", " ", parser.format_help())
    missing = []
    for action in _options(parser):
        name = action.option_strings[0] if action.option_strings else action.dest
        if not action.help:
            missing.append(f"{name}: no help")
            continue
        if action.required:
            continue  # a required option has no default to show
        shown = re.sub(r"\s+", " ", action.help % {"default": action.default})
        if "default" not in shown:
            missing.append(f"{name}: no default in {shown!r}")
        elif shown not in text:
            missing.append(f"{name}: help not rendered")
    assert not missing, f"{command}: " + "; ".join(missing)


def test_run_help_renders_the_defaults_of_its_main_options(capsys):
    with pytest.raises(SystemExit):
        cli_main(["run", "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    for option, default in [
        ("--dataset", "synthetic"),
        ("--lr", "0.05"),
        ("--rounds", "20"),
        ("--batch-size", "50"),
        ("--clients", "100"),
    ]:
        assert re.search(rf"{option} \S+ .*?\(default: {re.escape(default)}\)", text), option
    assert "--model" in text and "cnn_mnist" in text


def test_the_default_model_table_names_real_models_and_datasets():
    assert set(DEFAULT_MODELS) == set(DATASETS)
    assert set(DEFAULT_MODELS.values()) <= set(MODELS)


def test_run_prints_the_chosen_model_and_a_cache_hit(tmp_path, capsys):
    argv = ["run", "fedavg", "--dataset", "synthetic", "--clients", "6"]
    argv += ["--clients-per-round", "2", "--rounds", "1", "--device", "cpu"]
    argv += ["--cache", str(tmp_path), "--no-progress"]
    assert cli_main(argv) == 0
    first = capsys.readouterr().out
    assert "no --model given: using logreg for dataset synthetic" in first
    assert "loaded from cache" not in first
    assert cli_main(argv) == 0
    second = capsys.readouterr().out
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert f"loaded from cache (folder {folder})" in second
    assert cli_main([*argv, "--model", "logreg"]) == 0  # the same run, named in full
    third = capsys.readouterr().out
    assert "no --model given" not in third and "loaded from cache" in third


@pytest.mark.parametrize("command", sorted(p for p in COMMANDS if p.count(" ") == 1))
def test_a_parser_built_for_one_sub_command_is_that_sub_command_of_the_full_one(command):
    """`main` builds only the sub-command its command line names first: that parser's help, and
    so its options and defaults, are those of the full parser's."""
    name = command.split()[1]
    alone = dict(_parsers(build_parser(only=name)))[("flkit", name)]
    assert alone.format_help() == COMMANDS[command].format_help()
    assert build_parser(only=name).format_usage() == build_parser().format_usage()
