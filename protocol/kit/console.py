"""What both command lines share: `--json` output, plain text for untrusted strings, and the
error-to-exit mapping (usage 2, Ctrl-C 130, a typed error its own status)."""

from __future__ import annotations

import json
import logging
import secrets
import signal
import sqlite3
import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hearth.protocol.kit.home import storage_problem
from hearth.protocol.kit.interrupts import held
from hearth.protocol.transport.taskgroups import leaves, single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

if TYPE_CHECKING:  # typer and rich load when used, not before Ctrl-C is held
    import typer
    from rich.text import Text


_KEEP = {"\n", "\t", "\u200d"}  # the zero-width joiner holds emoji sequences together


def plain(text: str, limit: int | None = None) -> str:
    """Untrusted text (from a model, a tool, a peer, the web) made safe to show as-is.

    Control and format characters (C0 but newline and tab, DEL, C1, bidi overrides, zero
    widths) become visible escapes such as `\\x1b` or `\\u202e`, so nothing is hidden or
    interpreted by a terminal; past `limit` characters the rest is replaced by an explicit
    "…(N more characters)" marker. Render the result without markup (rich `markup=False`
    or a `rich.text.Text`).
    """
    shown = text if limit is None or len(text) <= limit else text[:limit]
    out: list[str] = []
    for ch in shown:
        if ch in _KEEP or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    if len(shown) < len(text):
        out.append(f"…({len(text) - len(shown)} more characters)")
    return "".join(out)


def cell(value: object) -> Text:
    """Untrusted text for a rich table cell or line: `plain`, never markup."""
    from rich.text import Text

    return Text(plain("" if value is None else str(value)))


def emit(as_json: bool, payload: dict[str, Any], render: Callable[[], None]) -> None:
    """Print exactly one JSON object with `--json`, else the human rendering."""
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        render()


CANCELLED = HearthError(ErrorCode.CANCELLED, "cancelled by the user")


@contextmanager
def reporting(as_json: bool) -> Iterator[None]:
    """Turn a `HearthError` into its JSON object or message, and its exit status;
    Ctrl-C anywhere (inside a task group too) into `cancelled`."""
    try:
        with single_error():  # a task group's lone HearthError is reported as itself
            yield
    except HearthError as exc:
        _fail(as_json, exc)
    except KeyboardInterrupt:
        _fail(as_json, CANCELLED)
    except BaseExceptionGroup as group:
        if any(isinstance(e, KeyboardInterrupt) for e in leaves(group)):
            _fail(as_json, CANCELLED)
        _internal(as_json)
    except (OSError, sqlite3.OperationalError) as exc:
        if (problem := storage_problem(exc)) is None:
            _internal(as_json)
        else:
            _fail(as_json, problem)
    except Exception:
        _internal(as_json)


def _internal(as_json: bool) -> None:
    trace = secrets.token_hex(4)
    logging.getLogger("hearth").exception("internal error (trace %s)", trace)
    _fail(as_json, HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})"))


def report(as_json: bool, exc: HearthError) -> None:
    """Print `exc` as its JSON object (stdout) or its message (stderr)."""
    if as_json:
        sys.stdout.write(json.dumps(exc.to_json()) + "\n")
    else:  # the message may quote a peer: plain text, never markup
        sys.stderr.write(f"error ({exc.code.value}): {plain(exc.message)}\n")
    sys.stdout.flush()
    sys.stderr.flush()


def _fail(as_json: bool, exc: HearthError) -> None:
    report(as_json, exc)
    raise SystemExit(exc.exit_status)


def configure_logging(level: int = logging.WARNING, log_file: Path | None = None) -> None:
    """Log records of `level` and above to stderr, and to `log_file` (rotated, 0600) when
    given, whatever level a library sets on its own logger (bm25s sets DEBUG on its own)."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        from hearth.protocol.kit.request_log import log_file_handler

        handlers.append(log_file_handler(log_file))
    for handler in handlers:
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=handlers, force=True)
    # httpx logs every request's URL at INFO, and a URL can carry a query (a search, a
    # private value): only debug output (`-v`) shows them
    quiet = level if level <= logging.DEBUG else max(level, logging.WARNING)
    logging.getLogger("httpx").setLevel(quiet)


def run_cli(app: typer.Typer) -> None:
    """Run a command line with the contract's exits: usage errors are 2 (under `--json`
    one `{"error": {"code": "usage", ...}}` object), Ctrl-C at any moment 130."""
    import typer

    args = sys.argv[1:]
    as_json = "--json" in (args[: args.index("--")] if "--" in args else args)
    configure_logging()
    with reporting(as_json):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if held():  # a Ctrl-C while the command line loaded
            raise KeyboardInterrupt
        try:
            status = app(standalone_mode=False)
            if status == CANCELLED.exit_status:  # typer's own answer to Ctrl-C: say so
                raise KeyboardInterrupt
        except typer.TyperException as exc:  # an unknown option, a missing argument, …
            _usage(as_json, exc)
        except typer.Abort as exc:  # end of input at a prompt
            raise KeyboardInterrupt from exc
    raise SystemExit(status or 0)


USAGE_EXIT = 2


def _usage(as_json: bool, exc: typer.TyperException) -> None:
    if as_json:
        error = {"error": {"code": "usage", "message": exc.format_message()}}
        sys.stdout.write(json.dumps(error) + "\n")
    else:
        show = getattr(exc, "show", None)  # the command line's own usage hint and message
        if show is None:
            sys.stderr.write(f"Error: {exc.format_message()}\n")
        else:
            show()
    raise SystemExit(USAGE_EXIT)


def add_version(app: typer.Typer) -> None:
    """Give `app` a `--version` flag: the installed Hearth's version."""
    import typer

    def show(value: bool) -> None:
        if value:
            from importlib.metadata import version

            typer.echo(f"{Path(sys.argv[0]).name} {version('hearth')}")
            raise typer.Exit()

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", callback=show, is_eager=True, help="Show the version and exit."
        ),
    ) -> None:
        pass


def read_uri(argument: str) -> str:
    """An invite URI given as an argument, or `-`: one line of stdin, asked for with a
    prompt on stderr when stdin is a terminal (the URI stays out of shell history)."""
    if argument != "-":
        return argument
    if sys.stdin.isatty():
        sys.stderr.write("Paste the hearth://pair URI and press Enter: ")
        sys.stderr.flush()
    line = sys.stdin.readline()
    if not line.strip():
        raise HearthError(ErrorCode.INVALID_INPUT, "no invite URI on standard input")
    return line.strip()
