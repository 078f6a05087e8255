"""The process's one client context: the only process-global mutable state of the client.

:func:`get_context` gives it to every client object; ``initialize()`` installs a distributed one
(:func:`set_context` under :func:`context_lock`), and a standalone ``DistGraph`` opens one on first use
(:func:`standalone_context`).
"""

from __future__ import annotations

import os
import threading

from graphstore.client.context.client_context import NOT_INITIALIZED, ClientContext


class _ProcessContext:
    """Holder of the process's context (the one piece of global mutable state)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.context: ClientContext | None = None


_PROCESS = _ProcessContext()


def get_context() -> ClientContext:
    """The process's client context.

    Raises:
        RuntimeError: when neither ``initialize()`` was called nor a standalone DistGraph opened.
    """
    ctx = _PROCESS.context
    if ctx is None or ctx.closed:
        raise RuntimeError(NOT_INITIALIZED)
    return ctx


def current_context() -> ClientContext | None:
    """The process's context, or None when there is none (never raises)."""
    ctx = _PROCESS.context
    return None if ctx is None or ctx.closed else ctx


def set_context(ctx: ClientContext | None) -> ClientContext | None:
    """Install ``ctx`` as the process's context; returns the one it replaced (not closed here)."""
    with _PROCESS.lock:
        previous, _PROCESS.context = _PROCESS.context, ctx
        return previous


def context_lock() -> threading.RLock:
    """The lock serializing creation and replacement of the process's context."""
    return _PROCESS.lock


def standalone_context(part_config: str) -> ClientContext:
    """The process's context for ``part_config``: the current one if there is one (a distributed context
    keeps talking to its servers; a standalone one of the same partition config is reused), else a new
    standalone context loading every partition in-process, installed as the process's context.

    Raises:
        FileNotFoundError: a missing partition config.
        ValueError: a standalone graph of another partition config is open.
    """
    with _PROCESS.lock:
        ctx = current_context()
        if ctx is not None:
            if ctx.standalone and ctx.part_config != os.path.abspath(os.fspath(part_config)):
                raise ValueError(
                    f"a standalone graph from {ctx.part_config!r} is open; call exit_client() before opening "
                    f"{os.fspath(part_config)!r}"
                )
            return ctx
        ctx = ClientContext.open_standalone(part_config)
        set_context(ctx)
        return ctx
