"""Filling the remote-exec template: the local argument list that runs a command on another host.

The template itself (its placeholders and their check) is part of the cluster config,
:mod:`graphstore.config.remote_exec`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from graphstore.config import validate_remote_exec


def remote_argv(template: str, host: str, command: Sequence[str]) -> list[str]:
    """Fill a remote-exec template: the argument list that runs ``command`` on ``host``.

    The template is split into words like a shell would (no shell runs it). A word that is exactly
    ``{command}`` becomes the command's words, each shell-quoted (ordinary words are unchanged), so ssh,
    which hands its arguments to the remote shell, runs exactly ``command``, and tools that run their
    arguments directly (``ip netns exec``, ``docker exec``) get them as they are. Inside a longer word,
    ``{command}`` becomes the whole command line as one shell-quoted string (``sh -c "cd /x && {command}"``).
    ``{host}`` becomes ``host``.

    Args:
        template: e.g. ``ssh -o BatchMode=yes {host} {command}``.
        host: the ``exec_host`` of the target.
        command: the program and its arguments.

    Returns:
        The argument list to execute locally.

    Raises:
        ConfigError: an invalid template.
    """
    validate_remote_exec(template)
    argv: list[str] = []
    for word in shlex.split(template):
        if word == "{command}":
            argv.extend(shlex.quote(part) for part in command)
        else:
            argv.append(word.replace("{host}", host).replace("{command}", shlex.join(command)))
    return argv
