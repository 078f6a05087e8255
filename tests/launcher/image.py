"""The project's Docker image, built without Docker: the Dockerfile's steps run on this machine.

``build_local_image(tmp)`` reads the Dockerfile and carries out what its instructions do to the image's
file system, inside ``tmp``:

- ``WORKDIR`` / ``COPY`` / ``ENV`` / ``ARG``: the working directory is ``tmp/root/<WORKDIR>``, each
  ``COPY`` copies its sources from the build context (the repository) there, so a source that does
  not exist fails the build as it would under Docker;
- ``RUN pip install <local path>``: installs that folder into the image's Python environment (a venv in
  ``tmp``) the way pip does in the image, non-editable, so the package holds what its build
  configuration lists and nothing else;
- ``RUN pip install <requirement from an index>`` (torch): not downloaded; the image's environment
  sees this machine's installed packages instead;
- ``RUN python3 -m venv DIR``: DIR is the image's Python environment (it exists already); a later
  ``RUN`` command on files under DIR (trimming installed packages) is skipped: those are this
  machine's packages here;
- any other ``RUN`` command runs with ``sh -c`` in the working directory, with the image's ``bin``
  first on ``PATH``.

``FROM`` is not fetched: the image's Python is this machine's (the same minor version is checked).
Several stages (``FROM ... AS build`` ... ``COPY --from=build``) share one file system root and one
Python environment, so ``COPY --from`` copies within the root (the Python environment is already
there); the image's working directory is the last stage's. ``$VAR`` in ``ENV`` that no ``ARG`` or
``ENV`` defines takes this process's value (``PATH=/opt/venv/bin:$PATH``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass, field
from pathlib import Path

from tests.launcher.helpers import REPO

DOCKERFILE = REPO / "Dockerfile"


@dataclass
class LocalImage:
    """The built image: its file system root, working directory, Python environment and settings."""

    root: Path
    workdir: Path
    bin: Path
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)
    exposed: list[int] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)

    def environ(self) -> dict[str, str]:
        """This process's environment with the image's ``ENV`` and its ``bin`` first on ``PATH``."""
        env = dict(os.environ)
        env.update(self.env)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, argv: list[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command in the image (its working directory, environment and ``PATH``)."""
        return subprocess.run(
            argv, cwd=self.workdir, env=self.environ(), capture_output=True, text=True, timeout=timeout_s
        )


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, comments dropped and continued lines joined."""
    joined = re.sub(
        r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    out = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _substitute(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), ""), text)


def _pairs(rest: str) -> dict[str, str]:
    """``K=V K2="V 2"`` (ENV / ARG arguments) as a dict; an ``ARG`` without a default maps to ''."""
    out = {}
    for word in shlex.split(rest):
        key, _, value = word.partition("=")
        out[key] = value
    return out


def _exec_form(rest: str) -> list[str]:
    import json

    return json.loads(rest) if rest.startswith("[") else ["sh", "-c", rest]


def _python_env(folder: Path) -> Path:
    """A venv whose Python sees this machine's installed packages (not this checkout's editable install)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    purelib = Path(sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})["purelib"])
    # A path line of a .pth file adds that folder to sys.path without running its own .pth files, so the
    # editable install's finder there stays out of the image.
    (purelib / "host-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin"


def _pip_install(args: list[str], image: LocalImage, python: Path) -> None:
    """``pip install ...`` of a RUN line: local folders are installed, index requirements are not."""
    positional = [a for a in args if not a.startswith("-")]
    local = [a for a in positional if a.startswith((".", "/")) and (image.workdir / a).exists()]
    if not local or len(local) != len(positional):
        return  # from a package index (torch): provided by this machine's environment
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    cmd += ["--no-build-isolation", "--no-index", *local]
    result = subprocess.run(cmd, cwd=image.workdir, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"RUN pip install {' '.join(local)} failed:\n{result.stderr[-3000:]}"


def _run_step(command: str, image: LocalImage, python: Path, venvs: list[str]) -> None:
    for part in command.split("&&"):
        argv = shlex.split(part)
        if argv[:2] == ["pip", "install"]:
            _pip_install(argv[2:], image, python)
            continue
        if len(argv) == 4 and argv[0].startswith("python") and argv[1:3] == ["-m", "venv"]:
            venvs.append(argv[3].rstrip("/"))  # the image's Python environment stands for it
            continue
        if any(word.startswith(f"{venv}/") for venv in venvs for word in argv):
            continue  # a change to installed packages: here they are this machine's, left alone
        result = subprocess.run(
            ["sh", "-c", part],
            cwd=image.workdir,
            env=image.environ(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, (
            f"RUN {part.strip()} failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )


def _copy(context: Path, sources: list[str], target: Path, into_folder: bool) -> None:
    """Docker's COPY: a folder's contents go into ``target``; a file goes into it when ``into_folder``
    (a destination with a trailing slash, or several sources) or it is a folder, else becomes it."""
    into_folder = into_folder or target.is_dir()
    for source in sources:
        path = context / source
        assert path.exists(), f"COPY {source}: not in the build context"
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
        elif into_folder:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.name)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def _copy_from_stage(root: Path, sources: list[str], target: Path, venvs: list[str]) -> None:
    """``COPY --from=STAGE``: stages share ``root``; a stage's Python environment is the image's."""
    for source in sources:
        if source.rstrip("/") in venvs:
            continue
        path = root / source.lstrip("/")
        assert path.exists(), f"COPY --from: {source} does not exist in the earlier stage"
        if path != target:
            _copy(root, [source.lstrip("/")], target, into_folder=False)


def build_local_image(folder: Path, dockerfile: Path = DOCKERFILE, context: Path = REPO) -> LocalImage:
    """Carry out the Dockerfile's steps into ``folder`` (see the module docstring).

    Raises:
        AssertionError: a step fails (a missing COPY source, a failing RUN command, a Python of
            another minor version than the FROM image's tag).
    """
    root = folder / "root"
    root.mkdir(parents=True)
    bin_dir = _python_env(folder / "python")
    python = bin_dir / "python"
    image = LocalImage(root=root, workdir=root, bin=bin_dir)
    variables: dict[str, str] = {}
    venvs: list[str] = []
    for keyword, rest in instructions(dockerfile.read_text()):
        if keyword == "ENV":
            rest = _substitute(rest, {**os.environ, **variables, **image.env})
        elif keyword not in ("RUN", "CMD"):
            rest = _substitute(rest, {**variables, **image.env})
        if keyword == "FROM":
            tag = re.search(r"python:(\d+)\.(\d+)", rest)
            if tag:
                assert sys.version_info[:2] == (int(tag.group(1)), int(tag.group(2))), f"FROM {rest}"
        elif keyword == "ARG":
            for key, value in _pairs(rest).items():
                variables.setdefault(key, value)
        elif keyword == "ENV":
            image.env.update(_pairs(rest))
        elif keyword == "WORKDIR":
            image.workdir = root / rest.lstrip("/")
            image.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            *sources, dest = shlex.split(rest)
            target = image.workdir / dest if not dest.startswith("/") else root / dest[1:]
            stage = [word for word in sources if word.startswith("--from=")]
            sources = [word for word in sources if not word.startswith("--")]
            if stage:
                _copy_from_stage(root, sources, target, venvs)
            else:
                _copy(context, sources, target, into_folder=dest.endswith("/") or len(sources) > 1)
        elif keyword == "RUN":
            _run_step(_substitute(rest, {**variables, **image.env}), image, python, venvs)
        elif keyword == "EXPOSE":
            image.exposed += [int(port.split("/")[0]) for port in rest.split()]
        elif keyword == "VOLUME":
            image.volumes += _exec_form(rest) if rest.startswith("[") else rest.split()
        elif keyword == "CMD":
            image.cmd = _exec_form(rest)
    return image
