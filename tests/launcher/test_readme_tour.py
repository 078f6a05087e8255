"""The README's Quick tour stays runnable: it starts by activating the venv that ``make install`` makes
(so ``graphstore`` and ``python`` resolve in a fresh shell), and every ``graphstore`` command in it
parses with the current command line and names files that exist in the repository."""

from __future__ import annotations

import shlex

from graphstore.launcher.cli import build_parser
from tests.launcher.helpers import REPO


def _tour_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    start = text.index("## Quick tour")
    block = text[
        text.index("```bash\n", start) + len("```bash\n") : text.index(
            "```", text.index("```bash\n", start) + 7
        )
    ]
    commands, current = [], ""
    for line in block.splitlines():
        line = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        current += line.rstrip("\\")
        if line and not line.endswith("\\"):
            commands.append(current.strip())
            current = ""
    return commands


def test_the_tour_activates_the_venv_first_and_every_command_parses():
    commands = _tour_commands()
    assert commands[0] == "source .venv/bin/activate"
    assert "VENV   ?= .venv" in (REPO / "Makefile").read_text(), (
        "make install creates the venv the tour activates"
    )
    parser = build_parser()
    graphstore_commands = [c for c in commands if c.startswith("graphstore ")]
    assert {c.split()[1] for c in graphstore_commands} >= {
        "generate",
        "partition",
        "launch",
        "server",
        "status",
        "stop",
    }
    for command in graphstore_commands:
        words = shlex.split(command.split(" > ")[0].rstrip("&").strip())[1:]
        args = parser.parse_args(words)
        for name in ("graph", "config"):
            value = getattr(args, name, None)
            if value and not value.startswith("data/") and value.endswith((".npz", ".yaml")):
                assert (REPO / value).is_file(), f"{command}: {value} is not in the repository"
