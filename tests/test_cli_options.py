"""The options of every `flkit` command: each one says what it does (not only its default), no
help leaks docstring markup, one quiet flag and one --jobs default across commands, --version."""

from __future__ import annotations

import argparse
import re

import pytest

import flkit
from flkit.cli import build_parser
from flkit.cli import main as cli_main
from flkit.reproduce.command import JOBS


def _parsers(parser, path=("flkit",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


COMMANDS = {" ".join(path): p for path, p in _parsers(build_parser())}
SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def _options(parser):
    return [a for a in parser._actions if not isinstance(a, SKIP)]


def _described(text: str) -> bool:
    """Whether a help text says more than its default: two words once every "default: ..."
    part (to the end of its parenthesis, clause or text) is taken out."""
    rest = re.sub(r"\(?default:[^);]*\)?", "", text)
    return len(re.findall(r"[A-Za-z]{2,}", rest)) >= 2


def test_the_description_rule_on_hand_made_texts():
    assert not _described("default: 0")
    assert not _described("default: runs/sweep")
    assert not _described("(default: %(default)s)")
    assert not _described("seed (default: 0)")
    assert _described("data root (default: $FLKIT_DATA)")
    assert _described("seeds each grid point runs with (default: 0)")
    assert _described("default: none; the notebook's own values")  # words after the default


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_says_what_it_does(command):
    parser = COMMANDS[command]
    bare = [
        a.option_strings[0] if a.option_strings else a.dest
        for a in _options(parser)
        if not a.help or not _described(a.help % {"default": a.default})
    ]
    assert not bare, f"{command}: options without a description: {', '.join(bare)}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_has_no_docstring_markup(command):
    text = COMMANDS[command].format_help()
    for markup in (":mod:", ":func:", ":class:", ":data:", "``"):
        assert markup not in text, f"{command} --help shows {markup!r}"


QUIET = {"--quiet", "-q", "--no-progress"}


def test_one_quiet_flag_across_commands():
    """Every command that can be quieted takes --quiet, -q and --no-progress, as one option."""
    have = {}
    for command, parser in COMMANDS.items():
        for action in _options(parser):
            if QUIET & set(action.option_strings):
                assert set(action.option_strings) == QUIET, (command, action.option_strings)
                assert action.dest == "quiet" and action.default is False, command
                have[command] = action
    assert {"flkit run", "flkit reproduce", "flkit sweep", "flkit course grade"} <= set(have)


def test_one_jobs_default_across_commands():
    defaults = {
        command: action.default
        for command, parser in COMMANDS.items()
        for action in _options(parser)
        if "--jobs" in action.option_strings
    }
    assert {"flkit reproduce", "flkit sweep", "flkit course grade"} <= set(defaults)
    assert set(defaults.values()) == {JOBS} and JOBS == 1, defaults


@pytest.mark.parametrize("argv", [["run"], ["reproduce"], ["course", "grade"]])
def test_no_progress_is_the_quiet_flag(argv):
    args = build_parser().parse_args([*argv, "x"] if argv == ["course", "grade"] else argv)
    assert args.quiet is False
    extra = ["x"] if argv == ["course", "grade"] else []
    for flag in sorted(QUIET):
        assert build_parser().parse_args([*argv, *extra, flag]).quiet is True, flag


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"flkit {flkit.__version__}"
