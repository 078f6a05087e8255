"""Typed access to the fields of a cluster config document, and the errors it raises.

Every problem becomes one :class:`~graphstore.errors.ConfigError` line naming the config, the field
(``servers[1].port``, ``rpc.deadline_s``) and the value. The rules every reader of the cluster YAML
shares live here, once:

- a string field takes a YAML string only: ``graph_name: 2024`` is an error (YAML reads it as a number,
  and ``0123`` or ``1e3`` would not survive the trip back to text); quote it;
- a path has ``~`` expanded and is made absolute against the YAML file's folder;
- a host is a name or an IP address; an IPv6 one may be written with or without brackets
  (``::1``, ``[::1]``) and is kept without them, so that addresses print as ``[::1]:port``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphstore.errors import ConfigError

# Marks a required field (``default=REQUIRED``): absent or null is an error.
REQUIRED = object()


class ConfigFileNotFoundError(ConfigError, FileNotFoundError):
    """The cluster config file does not exist (a ConfigError that is also a FileNotFoundError)."""


class FieldReader:
    """Reads the fields of one cluster config document.

    Args:
        source: the config's name in messages (its path).
        base_dir: the folder relative paths are resolved against.
    """

    def __init__(self, source: str, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def error(self, name: str, problem: str) -> ConfigError:
        """The error for field ``name`` (``problem`` names the value)."""
        return ConfigError(f"cluster config {self.source!r}: field {name!r} {problem}")

    def reject_unknown(self, mapping: Mapping, allowed: tuple[str, ...], prefix: str = "") -> None:
        """Raise for the first key of ``mapping`` not in ``allowed`` (typos are errors)."""
        for key in mapping:
            if key not in allowed:
                raise self.error(f"{prefix}{key}", f"is not a known field (known: {', '.join(allowed)})")

    def require(self, mapping: Mapping, name: str, prefix: str = "") -> Any:
        """The value of a field that must be given (and not null)."""
        if name not in mapping or mapping[name] is None:
            raise self.error(f"{prefix}{name}", "is missing")
        return mapping[name]

    def _get(self, mapping: Mapping, name: str, prefix: str, default: Any) -> tuple[Any, bool]:
        """``(value, given)``: the field's value, or the default with ``given=False`` when absent."""
        if default is REQUIRED:
            return self.require(mapping, name, prefix), True
        value = mapping.get(name)
        return (default, False) if value is None else (value, True)

    def string(self, mapping: Mapping, name: str, prefix: str = "", default: Any = REQUIRED) -> Any:
        """A non-empty YAML string (a number is an error: quote it)."""
        value, given = self._get(mapping, name, prefix, default)
        return self._text(value, f"{prefix}{name}") if given else value

    def _text(self, value: Any, name: str) -> str:
        if not isinstance(value, str):
            hint = " (quote it to make it a string)" if isinstance(value, (int, float)) else ""
            raise self.error(name, f"= {value!r} must be a string, not {type(value).__name__}{hint}")
        if not value.strip():
            raise self.error(name, f"= {value!r} must be a non-empty string")
        return value

    def words(self, mapping: Mapping, name: str, prefix: str = "") -> list[str]:
        """A list of command-line words (one string is a one-word list; numbers are taken as their text)."""
        value, _ = self._get(mapping, name, prefix, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or any(
            isinstance(word, bool) or not isinstance(word, (str, int, float)) for word in value
        ):
            raise self.error(f"{prefix}{name}", f"must be a list of strings, got {value!r}")
        return [str(word) for word in value]

    def host(self, mapping: Mapping, name: str, prefix: str = "", default: Any = REQUIRED) -> Any:
        """A host name or IP address, an IPv6 one without its brackets."""
        value = self.string(mapping, name, prefix=prefix, default=default)
        return None if value is None else self._check_host(value, f"{prefix}{name}")

    def hosts(self, mapping: Mapping, name: str, default: list[str]) -> list[str]:
        """A non-empty list of hosts (one string is a one-host list)."""
        value, _ = self._get(mapping, name, "", default)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value:
            raise self.error(name, f"must be a non-empty list of hosts, got {value!r}")
        checked = []
        for index, host in enumerate(value):
            where = f"{name}[{index}]"
            checked.append(self._check_host(self._text(host, where), where))
        return checked

    def _check_host(self, value: str, name: str) -> str:
        if any(c.isspace() for c in value):
            raise self.error(name, f"= {value!r} is not a host name or IP address (it holds a space)")
        bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        if ":" in bare or bare != value:
            try:
                ipaddress.IPv6Address(bare)
            except ValueError:
                raise self.error(
                    name,
                    f"= {value!r} is not a host name or IP address (an IPv6 address is written ::1 or "
                    "[::1]; the port goes in its own field)",
                ) from None
        return bare

    def integer(
        self,
        mapping: Mapping,
        name: str,
        prefix: str = "",
        default: Any = REQUIRED,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> Any:
        """An integer (not a boolean), within ``minimum..maximum`` when given."""
        value, given = self._get(mapping, name, prefix, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{prefix}{name}", f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(f"{prefix}{name}", f"= {value} must be >= {minimum}")
        if maximum is not None and value > maximum:
            raise self.error(f"{prefix}{name}", f"= {value} must be <= {maximum}")
        return value

    def port(self, mapping: Mapping, name: str, prefix: str = "", default: Any = REQUIRED) -> Any:
        """A TCP port, 1..65535."""
        value, given = self._get(mapping, name, prefix, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{prefix}{name}", f"must be an integer port, got {value!r}")
        if not 1 <= value <= 65535:
            raise self.error(f"{prefix}{name}", f"= {value} is out of range 1..65535")
        return value

    def positive(self, mapping: Mapping, name: str, default: Any, prefix: str = "") -> Any:
        """A number > 0, as a float."""
        value = mapping.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{prefix}{name}", f"must be a number, got {value!r}")
        if not value > 0:
            raise self.error(f"{prefix}{name}", f"= {value} must be > 0")
        return float(value)

    def boolean(self, mapping: Mapping, name: str, default: bool, prefix: str = "") -> bool:
        """``true`` or ``false``."""
        value = mapping.get(name, default)
        if not isinstance(value, bool):
            raise self.error(f"{prefix}{name}", f"must be true or false, got {value!r}")
        return value

    def choice(
        self, mapping: Mapping, name: str, choices: tuple[str, ...], default: str, prefix: str = ""
    ) -> str:
        """One of ``choices``; YAML's bare on / off / yes / no (read as booleans) count as the words."""
        value = mapping.get(name, default)
        if value is True:
            value = "on"
        elif value is False:
            value = "off" if "off" in choices else "no"
        if value not in choices:
            raise self.error(f"{prefix}{name}", f"= {value!r} must be one of {', '.join(choices)}")
        return value

    def section(self, mapping: Mapping, name: str, fields: tuple[str, ...]) -> Mapping | None:
        """A nested mapping (``rpc``, ``tls``...) of the known ``fields``, or None when absent."""
        value = mapping.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(name, f"must be a mapping, got {value!r}")
        self.reject_unknown(value, fields, f"{name}.")
        return value

    def path(self, mapping: Mapping, name: str, prefix: str = "", default: Any = REQUIRED) -> Any:
        """An absolute path: ``~`` expanded, then resolved against the config's folder."""
        value = self.string(mapping, name, prefix=prefix, default=default)
        if value is None:
            return None
        if "\x00" in value:
            raise self.error(f"{prefix}{name}", f"= {value!r} is not a valid path (it holds a NUL character)")
        return str((self.base_dir / os.path.expanduser(value)).resolve())

    def command(self, mapping: Mapping, name: str, default: Any = None) -> Any:
        """A program on the hosts it runs on: ``~`` expanded, otherwise as written (``python3`` is
        looked up on the PATH there)."""
        value = self.string(mapping, name, default=default)
        return value if value is None else os.path.expanduser(value)
