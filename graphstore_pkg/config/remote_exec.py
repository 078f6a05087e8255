"""The remote-exec template (``remote_exec`` / ``graphstore launch --remote-exec``) and its check.

A template is a command line with two placeholders: ``{host}`` (a server's ``exec_host`` or a trainer
host) and ``{command}`` (what to run there), e.g. ``ssh -o BatchMode=yes {host} {command}``. Filling
it in is the launcher's job (``graphstore.launcher.remote_exec``).
"""

from __future__ import annotations

import shlex
import string

from graphstore.errors import ConfigError

REMOTE_EXEC_FIELDS = ("host", "command")


def validate_remote_exec(template: str, field_name: str = "remote_exec", source: str | None = None) -> str:
    """Check a remote-exec template: shell-like words, placeholders only ``{host}`` and ``{command}``.

    Args:
        template: e.g. ``ssh -o BatchMode=yes {host} {command}``.
        field_name: the name used in error messages.
        source: the config file, named in error messages when given.

    Returns:
        The template unchanged.

    Raises:
        ConfigError: unbalanced quotes, an unknown placeholder, or no ``{command}``.
    """
    where = f"cluster config {source!r}: field {field_name!r}" if source else f"field {field_name!r}"
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{where} must be a non-empty command template, got {template!r}")
    try:
        shlex.split(template)
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ConfigError(f"{where} = {template!r} is not a valid template: {exc}") from None
    unknown = sorted(fields - set(REMOTE_EXEC_FIELDS))
    if unknown:
        raise ConfigError(
            f"{where} = {template!r} uses unknown placeholder {{{unknown[0]}}}; "
            f"allowed: {{host}}, {{command}}"
        )
    if "command" not in fields:
        raise ConfigError(f"{where} = {template!r} has no {{command}} placeholder")
    return template
