"""The ``vtb`` command. Each subcommand module registers here (all of them live in ``vtb_app``).

A subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func=<callable(args) -> int>`` as the default. Whatever a subcommand raises ends here as one
line on stderr and an exit code per kind (``vtb_app.errors``); ``--debug`` (before or after the
subcommand) or ``VTB_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import vtb_app.openmp  # noqa: F401  (OMP_WAIT_POLICY=PASSIVE before torch loads)

# isort: split
import argparse
import importlib
import os
import sys
from typing import NoReturn

from vtb_app.errors import ExitCode, describe, one_line

# One line per subcommand module, in the order ``vtb --help`` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "vtb_app.commands.info",
    "vtb_app.evaluation.commands",
    "vtb_app.commands.synth",
    "vtb_app.commands.serve",
)
DEBUG_VARIABLE = "VTB_DEBUG"
DEBUG_HELP = f"show the traceback of an error (also: {DEBUG_VARIABLE}=1)"


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser (and its subcommands') whose usage errors are one line: ``main`` prints
    ``error: ...`` and exits 2, like every other user error, instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise SystemExit(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="vtb", description="VisualToolBench as a gymnasium environment.")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    for subparser in subparsers.choices.values():  # `vtb eval ... --debug` works too
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    debug = os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    command = "?"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        debug, command = debug or args.debug, args.command or ""
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        return int(args.func(args) or 0)
    except SystemExit as exc:
        if not isinstance(exc.code, str):  # argparse's usage errors (2) and --help (0) have said their piece
            raise
        print(f"error: {one_line(exc.code)}", file=sys.stderr)
        return ExitCode.USAGE
    except BaseException as exc:
        if debug:
            raise
        code, message = describe(exc, command)
        print(f"error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
