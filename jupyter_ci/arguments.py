"""Command-line options for the magic and the CLI, derived from the options table.

``%%ci --max-attempts 2 --review plot the iris data``: options come first, the prompt is the rest
of the line, taken verbatim (apostrophes, ``$x``, braces and JSON are not touched), followed by the
cell's body. The CLI's flags are made from the same table by :func:`add_option_flags`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from .options import ALIASES, OPTIONS, OPTIONS_BY_NAME, Option

_TOKEN = re.compile(r"\S+")


class OptionsError(ValueError):
    """The options before a prompt could not be read; the message says which and why."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of printing usage and exiting the kernel."""

    def error(self, message: str) -> Any:
        raise OptionsError(message)


def add_option_flags(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    """Add a flag for each of ``options`` (and the mode aliases) to ``parser``.

    Values are left as strings and default to ``None`` ("not given"); converting and checking them
    is the settings resolver's job, so the magic, the CLI and the server report errors alike.
    """
    for opt in options:
        names = [opt.flag] + ([opt.short] if opt.short else [])
        if opt.kind is bool:
            parser.add_argument(
                *names,
                dest=opt.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=opt.help,
            )
        else:
            metavar = "|".join(opt.choices) if opt.choices else opt.name.upper()
            parser.add_argument(*names, dest=opt.name, default=None, metavar=metavar, help=opt.help)
    for alias, (name, value) in ALIASES.items():
        parser.add_argument(
            alias,
            dest=name,
            action="store_const",
            const=value,
            help=f"Same as {OPTIONS_BY_NAME[name].flag} {value}.",
        )


def request_options() -> tuple[Option, ...]:
    """The options a single request (a ``%%ci`` line, a panel message) may carry."""
    return tuple(opt for opt in OPTIONS if opt.per_request)


def make_magic_parser(prog: str = "%%ci") -> argparse.ArgumentParser:
    """The parser for the options of ``%%ci`` and ``%ci``."""
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    add_option_flags(parser, request_options())
    return parser


def split_options(line: str, parser: argparse.ArgumentParser) -> tuple[list[str], str]:
    """Split ``line`` into the leading option tokens and the prompt that follows, verbatim.

    Options are recognised only at the start of the line; ``--`` ends them explicitly. The
    prompt keeps its original spacing and characters.
    """
    takes_value = {
        name
        for action in parser._actions
        if action.nargs is None and not isinstance(action, argparse._StoreConstAction)
        for name in action.option_strings
    }
    known = {name for action in parser._actions for name in action.option_strings}
    tokens: list[str] = []
    position = 0
    pending_value = False
    for match in _TOKEN.finditer(line):
        token = match.group()
        if pending_value:
            tokens.append(token)
            pending_value = False
        elif token == "--":  # noqa: S105 (the end-of-options marker)
            position = match.end()
            break
        elif token.split("=", 1)[0] in known:
            tokens.append(token)
            pending_value = token in takes_value
        elif token.startswith("-") and len(token) > 1 and not token[1:2].isdigit():
            raise OptionsError(f"unknown option {token}; see %ci --help")
        else:
            position = match.start()
            break
        position = match.end()
    if pending_value:
        raise OptionsError(f"option {tokens[-1]} needs a value")
    return tokens, line[position:].strip()
