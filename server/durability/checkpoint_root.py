"""Where Checkpoint and Restore calls may read and write: names confined to one root folder.

A client names a checkpoint (``"epoch-3"``, ``"runs/a/best"``); the server keeps it under its
configured checkpoint root (``graphstore server --checkpoint-root``; default: the ``checkpoints/``
folder beside the partition config). Absolute paths, ``..`` components and names whose real path
(symbolic links followed) leaves the root are refused with INVALID_ARGUMENT. Errors of the file
system become statuses that name the checkpoint (:meth:`CheckpointRoot.file_errors`), never INTERNAL.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from graphstore.errors import StorageFullError

DEFAULT_FOLDER = "checkpoints"
# What numpy's ``tofile`` / ``save`` says (as an OSError without errno) when a write comes up short.
_SHORT_WRITE = "requested and"
# errno -> (exception type, what went wrong) for file-system errors of a checkpoint or restore.
_FILE_ERRORS: dict[int, tuple[type[Exception], str]] = {
    errno.ENAMETOOLONG: (ValueError, "a file name is too long for the file system"),
    errno.ENOTDIR: (ValueError, "a component of the path is a file, not a folder"),
    errno.EISDIR: (ValueError, "a folder stands where a file belongs"),
    errno.ENOSPC: (StorageFullError, "the file system is full"),
    errno.EDQUOT: (StorageFullError, "the disk quota is used up"),
    errno.EACCES: (PermissionError, "permission denied"),
    errno.EPERM: (PermissionError, "operation not permitted"),
    errno.EROFS: (PermissionError, "the file system is read-only"),
    errno.ENOENT: (FileNotFoundError, "no such file or folder"),
}


class CheckpointRoot:
    """The folder a server's checkpoints live under.

    Args:
        root: the folder (made absolute; created on the first checkpoint).
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.path.abspath(os.fspath(root))

    @classmethod
    def for_partition(cls, part_config: str) -> CheckpointRoot:
        """The default root: ``checkpoints/`` beside the partition config ``part_config``."""
        return cls(os.path.join(os.path.dirname(os.path.abspath(part_config or ".")), DEFAULT_FOLDER))

    def resolve(self, name: str, create: bool = False) -> str:
        """The folder of checkpoint ``name``.

        Args:
            name: a relative name (``epoch-3``, ``runs/a/best``).
            create: create the root folder when missing (a checkpoint about to be written).

        Returns:
            The absolute folder under the root.

        Raises:
            ValueError: an empty or absolute name, a ``..`` component, a NUL character, or a name
                whose real path leaves the root.
        """
        if not isinstance(name, str) or not name or name.strip() in ("", "."):
            raise ValueError(f"path: a checkpoint needs a name relative to the checkpoint root, got {name!r}")
        if "\x00" in name:
            raise ValueError(f"path: {name!r} contains a NUL character")
        if os.path.isabs(name) or name.startswith("~"):
            raise ValueError(
                f"path: {name!r} is absolute; give a name relative to the server's checkpoint root "
                f"(graphstore server --checkpoint-root, here {self.root!r})"
            )
        if ".." in name.replace("\\", "/").split("/"):
            raise ValueError(f"path: {name!r} has a '..' component; names stay inside the checkpoint root")
        folder = os.path.normpath(os.path.join(self.root, name))
        if create:
            with self.file_errors(name):
                os.makedirs(self.root, exist_ok=True)
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(folder)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise ValueError(f"path: {name!r} leads outside the checkpoint root through a symbolic link")
        return folder

    @contextmanager
    def file_errors(self, name: str) -> Iterator[None]:
        """Turn file-system errors inside the block into errors naming checkpoint ``name``.

        ENAMETOOLONG, ENOTDIR, EISDIR -> ValueError (INVALID_ARGUMENT); ENOSPC, EDQUOT ->
        :class:`~graphstore.errors.StorageFullError` (RESOURCE_EXHAUSTED); EACCES, EPERM, EROFS ->
        PermissionError (FAILED_PRECONDITION); ENOENT -> FileNotFoundError (NOT_FOUND); any other
        OSError -> OSError with the same message form (FAILED_PRECONDITION).
        """
        try:
            yield
        except (ConnectionError, TimeoutError):
            raise
        except OSError as exc:
            code = exc.errno
            if code is None and _SHORT_WRITE in str(exc):
                code = errno.ENOSPC  # numpy's short write: the device ran out of space mid-file
            elif code is None:
                raise  # raised by graphstore itself, with its own message
            kind, problem = _FILE_ERRORS.get(code, (OSError, exc.strerror or "file-system error"))
            where = f" ({exc.filename})" if exc.filename else ""
            message = f"path: checkpoint {name!r}: {problem}{where}"
            if kind is OSError:
                raise OSError(code, message) from None
            raise kind(message) from None


class NamedCheckpoints:
    """A partition's checkpoint calls with checkpoint *names* under its root, as clients make them: every
    name is resolved inside the root (and refused when it leaves it), and file-system errors become
    errors naming the checkpoint. The server's Checkpoint / Restore handlers and the in-process
    transport both go through it.

    Args:
        root: the partition's checkpoint root.
        partition: the partition (its folder-path ``checkpoint``, ``commit_checkpoint``,
            ``abort_checkpoint`` and ``restore``).
    """

    def __init__(self, root: CheckpointRoot, partition) -> None:
        self.root = root
        self._partition = partition

    def checkpoint(self, name: str, names: list[str] | None = None, save_id: str | None = None):
        """Write tensors into checkpoint ``name`` (``(files, rows)``; see ``PartitionServer.checkpoint``).

        Raises:
            ValueError: a name that is absolute, has ``..`` or leaves the root; ENAMETOOLONG / ENOTDIR.
            StorageFullError, PermissionError, OSError: the file system refused (naming the checkpoint).
        """
        with self.root.file_errors(name):
            return self._partition.checkpoint(self.root.resolve(name, create=True), names, save_id=save_id)

    def commit(self, name: str, save_id: str, names: list[str]) -> None:
        """Commit save ``save_id`` of checkpoint ``name`` (see :meth:`checkpoint`)."""
        with self.root.file_errors(name):
            self._partition.commit_checkpoint(self.root.resolve(name), save_id, names)

    def abort(self, name: str, save_id: str) -> None:
        """Drop the unfinished save ``save_id`` of checkpoint ``name``."""
        with self.root.file_errors(name):
            self._partition.abort_checkpoint(self.root.resolve(name), save_id)

    def restore(self, name: str, names: list[str] | None = None):
        """Restore tensors from checkpoint ``name`` (``(names, rows)``)."""
        with self.root.file_errors(name):
            return self._partition.restore(self.root.resolve(name), names)
