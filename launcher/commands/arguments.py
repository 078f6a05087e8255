"""What every ``graphstore`` subcommand does with argparse: its parser, described by its module
docstring, and the config dataclass it runs with, built from the parsed arguments."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def add_command(subparsers, name: str, summary: str, doc: str, **options: Any) -> argparse.ArgumentParser:
    """Add subcommand ``name``; its ``--help`` description is the first paragraph of ``doc``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers`` returned.
        name: the subcommand.
        summary: the one-line help in ``graphstore --help``.
        doc: the command module's docstring (``...`` literals are shown without their backquotes).
        options: more ``add_parser`` arguments (``epilog``, ``formatter_class``).

    Returns:
        The subcommand's parser.
    """
    description = doc.strip().split("\n\n")[0].replace("``", "")
    return subparsers.add_parser(name, help=summary, description=description, **options)


def dataclass_from_args(cls: type[T], args: argparse.Namespace, **computed: Any) -> T:
    """An instance of dataclass ``cls``: each field from the argument of the same name, or ``computed``.

    Fields with neither keep their default.

    Args:
        cls: the config dataclass.
        args: the parsed arguments.
        computed: values of fields that no argument gives as they are (converted units, a token read
            from a file); they win over an argument of the same name.

    Returns:
        The instance.
    """
    values = {
        spec.name: getattr(args, spec.name) for spec in dataclasses.fields(cls) if hasattr(args, spec.name)
    }
    return cls(**{**values, **computed})
