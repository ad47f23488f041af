"""The ``vlmcheck`` command line: one module per command group, each a thin layer over a library function.

:data:`COMMANDS` names every command and where it is defined; ``--help`` lists them from it, in its order.
Shared options, one-sentence errors and running a task: ``cli/_common.py``.  What a command prints about
results: ``report/terminal.py``.
"""

from __future__ import annotations

import errno
import functools
import pkgutil
import sys
from typing import Any

import typer

from . import _help
from ..core.files import broken_link
from ._common import freeze, say_error

_help.install()

#: every command and command group, in the order ``--help`` lists it (typer lists the groups last), and its
#: ``module:attribute`` in cli/ (a function, or a group's typer app): the one place a command is named.  A run
#: imports its command's module only (command routing, not a switch on a method)
COMMANDS = dict((
    ("version", "info:version"), ("models", "info:list_models"), ("list", "info:list_all"),
    ("describe", "describe:describe"), ("run", "runs:run_cmd"), ("resume", "runs:resume"),
    ("retry-failed", "runs:retry_failed_cmd"), ("merge", "runs:merge"), ("meta", "world:meta"),
    ("genception", "genception:genception"), ("compare", "outputs:compare"), ("plan", "outputs:plan"),
    ("export", "outputs:export_cmd"), ("report", "outputs:report"), ("perturb", "perturb:perturb"),
    ("track", "track:track"), ("demo", "demo:demo"),
    ("world", "world:world_app"), ("vhx", "vhx:vhx_app"), ("cast", "cast:cast_app"), ("chef", "chef:chef_app"),
    ("data", "data:data_app"),
))


def _print_version(value: bool) -> None:
    if value:
        from .._version import __version__

        typer.echo(__version__)
        raise typer.Exit()


def _options(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                          help="Print the vlmcheck version and exit.")) -> None:
    """Annotation-free evaluation of vision-language models."""


def _new_app(names: list[str]) -> typer.Typer:
    new = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      context_settings={"help_option_names": ["-h", "--help"]},  # every command, as most CLIs
                      help="Annotation-free evaluation of vision-language models.")
    new.callback()(_options)
    for name in names:
        target = pkgutil.resolve_name(f"{__name__}.{COMMANDS[name]}")
        if isinstance(target, typer.Typer):
            new.add_typer(target, name=name)
        else:
            new.command(name)(target)
    return new


@functools.cache
def _app() -> typer.Typer:
    """The whole app, every command registered (made on first use: ``vlmcheck.cli.app``)."""
    return _new_app(list(COMMANDS))


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: options whose value is a file or folder: an empty one is an unset shell variable, never "here"
PATH_OPTIONS = ("--out", "-o", "--output", "--data", "--cases", "--pairs", "--annotations", "--images", "--recipe",
                "--external", "--gallery", "--vqa", "--model")
OUTPUT_OPTIONS = ("--out", "-o", "--output")


def empty_path_argument(argv: list[str]) -> str | None:
    """One sentence when a path argument or a path option's value is empty (``--out "$UNSET"``): click would
    read it as the current folder, and a run, or ``--overwrite``, would work among the user's files there."""
    previous = ""
    for token in argv:
        name, eq, value = token.partition("=")
        if token.startswith("--") and eq and name in PATH_OPTIONS and not value.strip():
            return f"{name} is empty (an unset shell variable?); give a folder or file"
        if not token.strip():
            if previous in PATH_OPTIONS:
                return f"{previous} is empty (an unset shell variable?); give a folder or file"
            if not previous.startswith("-") or previous in ("--resume", "--overwrite", "--progress",
                                                              "--no-progress", "--allow-outside"):
                return "an empty path argument (an unset shell variable?); give a folder or file"
        if previous in OUTPUT_OPTIONS or (eq and name in OUTPUT_OPTIONS):
            why = broken_link(value if eq and name in OUTPUT_OPTIONS else token)
            if why:
                return why
        previous = token
    return None


def only(argv: list[str]) -> typer.Typer:
    """An app with only the command or group that ``argv`` starts with, its module alone imported (typer builds
    every registered command's options on each call).  The whole app when ``argv`` starts with an option
    (``--help``, ``--version``) or names no command (click's own error, with its suggestions)."""
    if not argv or argv[0].startswith("-") or argv[0] not in COMMANDS:
        return _app()
    return _new_app([argv[0]])


def main() -> None:  # pragma: no cover - exercised through subprocesses in tests
    """The console script: a failure the user can act on ends in one sentence and exit 2, never a traceback."""
    from ..store.errors import StoreError  # not store.db: that loads numpy and asyncio

    empty = empty_path_argument(sys.argv[1:])
    if empty:
        say_error(empty)
        sys.exit(2)
    freeze("start-up")  # the CLI's modules: never garbage (_common.freeze)
    try:
        only(sys.argv[1:])(prog_name="vlmcheck")
    except StoreError as exc:
        say_error(str(exc))
        sys.exit(2)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)):
            say_error(_full_disk(exc.filename))
        elif isinstance(exc, PermissionError):
            say_error(f"permission denied: {exc.filename or exc}; fix the permissions or choose another folder")
        elif exc.errno == errno.EROFS:
            say_error(f"read-only file system: {exc.filename or exc}; choose another folder")
        elif exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.ELOOP) and exc.filename:
            say_error(_path_error(exc))
        else:
            raise
        sys.exit(2)


def _full_disk(filename: object) -> str:
    """What filled: vlmcheck's cache (images and releases it keeps) or a run's folder (resumable), else the file."""
    import os
    from pathlib import Path

    if not filename:
        return "no space left on the disk; free some space and run the command again"
    path = Path(os.fsdecode(filename)).absolute()
    cache = Path(os.environ.get("VLMCHECK_CACHE") or Path.home() / ".cache" / "vlmcheck").absolute()
    if cache == path or cache in path.parents:
        return (f"no space left to write {path} in vlmcheck's cache {cache}; free some space there, or set "
                "VLMCHECK_CACHE to a folder on a disk with room, and run the command again")
    run = next((p for p in path.parents if (p / "store.sqlite").is_file()), None)
    if run is not None:
        return (f"no space left to write {path} in the run folder {run}; free some space and `vlmcheck resume "
                f"{run}` (finished samples are kept)")
    return f"no space left to write {path}; free some space and run the command again"


def _path_error(exc: OSError) -> str:
    """One sentence for an output path that cannot be made: the dangling or looping link on its way, else the
    component that is a file."""
    from pathlib import Path

    path = Path(exc.filename)
    for p in reversed((path, *path.parents)):
        why = broken_link(p)
        if why:
            return f"cannot write {path}: {why}"
        if p.exists() and not p.is_dir() and p != path:
            return f"cannot write {path}: {p} is a file, not a folder"
    return f"cannot write {path}: {exc.strerror or exc}"
