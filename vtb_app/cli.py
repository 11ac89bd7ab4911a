"""The ``vtb`` command. Each subcommand module registers here (all of them live in ``vtb_app``).

A subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func=<callable(args) -> int>`` as the default.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# One line per subcommand module, in the order ``vtb --help`` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "vtb_app.commands.info",
    "vtb_app.evaluation.commands",
    "vtb_app.commands.synth",
    "vtb_app.commands.serve",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vtb", description="VisualToolBench as a gymnasium environment.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
