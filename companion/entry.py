"""The `hearth` command: `hearth ask` answered by a running companion without loading the
command line, every other command (and every `ask` this does not take) through it.

A served `ask` needs a socket and `json`: the full command line (typer, which loads
pydantic to coerce each value) costs more than the answer's first token (issue 34). So
an `ask` whose arguments are plain, checked here against the same options and choices
`hearth.companion.cli.ask` declares, goes straight to the companion (`thin.py`); any
argument this parser would read differently from typer (a value starting with `-`, a
usage error, `--help`), or no companion, and the command line runs as before, with its
own messages and exits.
"""

from __future__ import annotations

from hearth.protocol.kit.interrupts import hold

hold()  # first: a Ctrl-C while the command line loads is reported once it can be

import argparse
import signal
import sys
from pathlib import Path
from typing import Literal, NoReturn, get_args

Route = Literal["auto", "local", "remote"]
ToolChoice = Literal["auto", "required", "none"]
FLAGS = {"--yes": "yes", "--no": "no", "--think": "think", "--continue": "continue_last"}
VALUED = {"--route", "--tool-choice", "--conversation", "--attach", "--home"}
OPTIONS = frozenset({*FLAGS, *VALUED, "--json"})  # what `hearth ask` takes, `--help` aside


class NotPlain(Exception):
    """These arguments are for the full command line to read."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise NotPlain(message)


def _parser() -> _Parser:
    parser = _Parser(prog="hearth ask", add_help=False, allow_abbrev=False)
    parser.add_argument("text")
    parser.add_argument("--route", choices=get_args(Route), default="auto")
    parser.add_argument("--tool-choice", choices=get_args(ToolChoice), default="auto")
    for flag, dest in FLAGS.items():
        parser.add_argument(flag, dest=dest, action="store_true")
    parser.add_argument("--conversation")
    parser.add_argument("--attach", action="append", default=[])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--json", dest="as_json", action="store_true")
    return parser


def plain_ask(args: list[str]) -> argparse.Namespace:
    """`hearth ask`'s arguments, when they read here exactly as the command line reads
    them; else `NotPlain`."""
    for arg in args:
        if arg.startswith("-") and arg.split("=", 1)[0] not in OPTIONS:
            raise NotPlain(arg)  # `--`, `-h`, `--help`, an unknown option, a value like -5
    return _parser().parse_args(args)


def served_ask(args: argparse.Namespace) -> bool:
    """Run `hearth ask` through a running companion; False when none serves the home, or
    when the command line's own checks come first."""
    from hearth.protocol.kit.console import configure_logging, reporting
    from hearth.protocol.kit.home import resolve_home
    from hearth.protocol.kit.interrupts import held
    from hearth.protocol.wire.errors import HearthError

    from .streaming import StreamingAnswer
    from .thin import ask_fields, connect, finish

    if (args.yes and args.no) or (args.conversation is not None and args.continue_last):
        return False  # the command line says what is wrong
    try:
        home = resolve_home(args.home, "HEARTH_HOME", "hearth", create=False)
    except HearthError:
        return False
    fields = ask_fields(
        args.text,
        args.route,
        args.tool_choice,
        thinking=args.think,
        conversation=args.conversation,
        continue_last=args.continue_last,
        attach=args.attach,
        yes=args.yes,
        no=args.no,
    )
    configure_logging()
    with reporting(args.as_json):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if held():  # a Ctrl-C while this loaded
            raise KeyboardInterrupt
        connection = connect(home)  # a Ctrl-C while a stuck companion is awaited: 130
        if connection is None:
            hold()  # again, while the command line loads
            return False
        with connection, StreamingAnswer() as view:
            payload = connection.ask(fields, view)
        finish(payload, args.as_json)
    return True


def main() -> None:
    """The `hearth` console script."""
    args = sys.argv[1:]
    if args[:1] == ["ask"]:
        try:
            plain = plain_ask(args[1:])
        except NotPlain:
            pass
        else:
            if served_ask(plain):
                raise SystemExit(0)
    from .cli import main as command_line

    command_line()
