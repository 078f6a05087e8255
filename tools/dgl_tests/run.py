"""Run DGL 2.4's own distributed test files on graphstore, with only their imports changed, and count.

DGL's test files are not part of this project (DGL's code is not ours to copy): this script takes a DGL
source tree, copies the test files and the helper modules they import into a scratch folder, points
their ``dgl`` imports at :mod:`graphstore.compat.dgl` (:mod:`rewrite`: nothing else in a file changes,
and the script checks that), runs pytest on each file with this venv's Python, and prints per file the
passed / failed / skipped counts, the skip reasons, the commonest failure messages, and the pass share
of the tests not skipped.

Get DGL's sources (tests only are read) and run::

    git clone --depth 1 -b v2.4.0 https://github.com/dmlc/dgl /tmp/dgl-src
    .venv/bin/python tools/dgl_tests/run.py --dgl-src /tmp/dgl-src

DGL's tests write to fixed folders under ``/tmp`` (``/tmp/partition``, ``/tmp/dist_graph``); where
``unshare`` can make a private mount namespace (Linux, root or user namespaces) each file runs with a
private, empty ``/tmp`` so that runs beside each other do not share them (``--shared-tmp`` turns it off).
DGL's tests read ``scipy`` (in the project's ``test`` extra). One of DGL's parametrize names ends with a
comma (``"use_graphbolt,"`` in test_distributed_sampling.py), which pytest 9 refuses at collection and
pytest 8 accepts (DGL's CI ran pytest 7); with a pytest 9 venv, give a pytest 8 beside it::

    .venv/bin/pip install --target /var/tmp/pytest8 "pytest<9" pytest-timeout
    .venv/bin/python tools/dgl_tests/run.py --dgl-src /tmp/dgl-src --pytest-dir /var/tmp/pytest8

(outside ``/tmp``, which each file sees empty; the scratch copy is under ``/var/tmp`` for the same reason).
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rewrite import changed_lines_are_imports, rewrite_source

TEST_FILES = (
    "tests/distributed/test_dist_graph_store.py",
    "tests/distributed/test_dist_tensor.py",
    "tests/distributed/test_distributed_sampling.py",
    "tests/distributed/test_partition.py",
    "tests/distributed/test_mp_dataloader.py",
    "tests/python/pytorch/distributed/optim/test_dist_optim.py",
)
# What the test files import besides dgl: tests/distributed/utils.py (``from utils import ...``),
# DGL's tensor helpers ``tests/backend`` (``import backend as F``) and ``tests/utils``.
HELPERS = ("tests/distributed/utils.py", "tests/backend", "tests/utils")


@dataclass
class FileResult:
    """The outcome of one test file.

    Attributes:
        file: the test file (relative to the DGL tree).
        passed, failed, errors, skipped: test counts (``errors``: errors outside the test body, e.g.
            at collection).
        skip_reasons: ``{reason: count}``.
        failure_reasons: ``{first line of the message: count}`` of failures and errors.
        seconds: wall time of the run.
        returncode: pytest's exit status (None when it was killed at ``--file-timeout``).
    """

    file: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    returncode: int | None = None

    @property
    def not_skipped(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def pass_share(self) -> float:
        return self.passed / self.not_skipped if self.not_skipped else 0.0


def prepare(dgl_src: Path, work: Path) -> dict[str, int]:
    """Copy the test files and helpers under ``work`` (DGL's layout) with their imports rewritten.

    Returns:
        ``{copied .py file: import lines changed}``.

    Raises:
        FileNotFoundError: a test file missing from ``dgl_src``.
        RuntimeError: a rewrite that changed more than imports (a bug of :mod:`rewrite`).
    """
    copied = []
    for rel in TEST_FILES:
        source = dgl_src / rel
        if not source.is_file():
            raise FileNotFoundError(f"{source} not found: is {dgl_src} a DGL source tree (tag v2.4.0)?")
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, work / rel)
        copied.append(work / rel)
    for rel in HELPERS:
        source = dgl_src / rel
        if source.is_dir():
            shutil.copytree(source, work / rel, dirs_exist_ok=True)
            copied += sorted((work / rel).rglob("*.py"))
        elif source.is_file():
            shutil.copy2(source, work / rel)
            copied.append(work / rel)
        else:
            print(f"warning: {source} not found; files importing it will fail to collect", file=sys.stderr)
    changes = {}
    for path in copied:
        old = path.read_text()
        new, count = rewrite_source(old)
        problems = changed_lines_are_imports(old, new)
        if problems:
            raise RuntimeError(f"{path}: the rewrite changed more than imports: {problems[:3]}")
        path.write_text(new)
        changes[str(path.relative_to(work))] = count
    return changes


def _reason(message: str | None, text: str | None) -> str:
    """One line saying why a test failed: pytest's message, or for a collection error (whose message is
    only "collection failure") the last ``E`` line of the traceback."""
    if message and message != "collection failure":
        for line in message.splitlines():
            if line.strip():
                return line.strip()[:200]
    errors = [line[1:].strip() for line in (text or "").splitlines() if line.startswith("E ")]
    if errors:
        return f"{message + ': ' if message else ''}{errors[-1]}"[:200]
    return message or "(no message)"


def count_tests(path: Path) -> int:
    """How many tests pytest would collect from a file, read from its source: each ``test_*`` function
    counts the product of its ``@pytest.mark.parametrize`` value lists (for a file that cannot be
    imported, so that its tests still count, as errors)."""
    total = 0
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        cases = 1
        for decorator in node.decorator_list:
            if (
                isinstance(decorator, ast.Call)
                and ast.unparse(decorator.func).endswith("parametrize")
                and len(decorator.args) >= 2
                and isinstance(decorator.args[1], (ast.List, ast.Tuple))
            ):
                cases *= len(decorator.args[1].elts)
        total += cases
    return total


def parse_junit(path: Path, result: FileResult, test_path: Path) -> None:
    """Fill ``result``'s counts and reasons from a pytest JUnit XML report; a file that fails to
    import counts each of its tests (:func:`count_tests`) as an error with the import's reason."""
    skips: collections.Counter = collections.Counter()
    failures: collections.Counter = collections.Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if outcome is not None and outcome.get("message") == "collection failure":
            count = count_tests(test_path)
            result.errors += count
            failures[f"not collected: {_reason(None, outcome.text)}"] += count
            continue
        if outcome is None:
            result.passed += 1
        elif outcome.tag == "skipped":
            result.skipped += 1
            skips[_reason(outcome.get("message"), None)] += 1
        else:
            if outcome.tag == "failure":
                result.failed += 1
            else:
                result.errors += 1
            failures[_reason(outcome.get("message"), outcome.text)] += 1
    result.skip_reasons = dict(skips.most_common())
    result.failure_reasons = dict(failures.most_common())


def _private_tmp_prefix() -> list[str]:
    """The command prefix that gives a process a private, empty ``/tmp`` (empty when unavailable)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run(
        [unshare, "-rm", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /tmp"],
        capture_output=True,
    )
    if probe.returncode != 0:
        return []
    return [
        unshare,
        "-rm",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount -t tmpfs none /tmp && exec "$@"',
        "-",
    ]


def run_file(
    work: Path,
    rel: str,
    python: str,
    test_timeout: int,
    file_timeout: int,
    prefix: list[str],
    extra: list[str],
    pytest_dir: Path | None = None,
) -> FileResult:
    """Run pytest on one rewritten file (in its folder, ``work/tests`` on the path as DGL's CI has it).

    Every process the run leaves behind (DGL's tests start servers in subprocesses) is ended with its
    process group.
    """
    result = FileResult(rel)
    test_path = work / rel
    report = work / "reports" / (test_path.stem + ".xml")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    paths = [str(pytest_dir) if pytest_dir else None, str(work / "tests"), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    env.setdefault("DGLBACKEND", "pytorch")
    env.setdefault("DGLTESTDEV", "cpu")
    env.pop("TMPDIR", None)
    command = [
        *prefix,
        python,
        "-m",
        "pytest",
        test_path.name,
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(test_path.parent),
        f"--junitxml={report}",
        f"--timeout={test_timeout}",
        *extra,
    ]
    log = work / "reports" / (test_path.stem + ".log")
    start = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(
            command,
            cwd=test_path.parent,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            result.returncode = process.wait(timeout=file_timeout)
        except subprocess.TimeoutExpired:
            result.returncode = None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    result.seconds = round(time.monotonic() - start, 1)
    if report.is_file():
        parse_junit(report, result, test_path)
    else:
        result.errors += 1
        result.failure_reasons = {f"no report (pytest exit {result.returncode}); see {log}": 1}
    return result


def render(results: list[FileResult], top: int) -> str:
    """The per-file table, the totals, skip reasons and the commonest failure messages."""
    lines = [
        "| file | passed | failed | errors | skipped | pass share (not skipped) | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {Path(r.file).name} | {r.passed} | {r.failed} | {r.errors} | {r.skipped} | "
            f"{r.pass_share:.1%} of {r.not_skipped} | {r.seconds} |"
        )
    passed = sum(r.passed for r in results)
    not_skipped = sum(r.not_skipped for r in results)
    lines.append(
        f"| **all** | {passed} | {sum(r.failed for r in results)} | {sum(r.errors for r in results)} | "
        f"{sum(r.skipped for r in results)} | {passed / not_skipped if not_skipped else 0:.1%} of "
        f"{not_skipped} | {sum(r.seconds for r in results):.0f} |"
    )
    for r in results:
        if r.skip_reasons:
            lines.append(f"\nskipped in {Path(r.file).name}:")
            lines += [f"  {count} x {reason}" for reason, count in r.skip_reasons.items()]
        if r.failure_reasons and top:
            lines.append(f"\nfailures in {Path(r.file).name} (commonest {top}):")
            lines += [f"  {count} x {reason}" for reason, count in list(r.failure_reasons.items())[:top]]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Prepare, run every file, print the table; exit 0 (the counts are the result)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dgl-src", type=Path, required=True, help="a DGL source tree (tag v2.4.0)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one, kept)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with graphstore and pytest")
    parser.add_argument("--files", nargs="*", help="run only these test files (names or paths)")
    parser.add_argument("--test-timeout", type=int, default=300, help="seconds per test (pytest-timeout)")
    parser.add_argument("--file-timeout", type=int, default=3600, help="seconds per file")
    parser.add_argument("--top", type=int, default=8, help="failure messages to list per file")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--shared-tmp", action="store_true", help="run with the machine's /tmp")
    parser.add_argument(
        "--pytest-dir", type=Path, help="a folder with pytest 8 (pip install --target), put first on the path"
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), e.g. -k")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="graphstore-dgl-tests-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    changes = prepare(args.dgl_src.resolve(), work)
    print(f"scratch copy: {work} (import lines rewritten: {sum(changes.values())} in {len(changes)} files)")
    prefix = [] if args.shared_tmp else _private_tmp_prefix()
    for folder, option in ((args.pytest_dir, "--pytest-dir"), (work, "--work")):
        if prefix and folder is not None and folder.resolve().is_relative_to("/tmp"):
            parser.error(f"{option} {folder} is under /tmp, which each file sees empty: use /var/tmp")
    print("each file runs with a private /tmp" if prefix else "files run with the machine's /tmp")
    selected = [
        rel for rel in TEST_FILES if not args.files or any(rel.endswith(Path(f).name) for f in args.files)
    ]
    results = []
    for rel in selected:
        result = run_file(
            work,
            rel,
            args.python,
            args.test_timeout,
            args.file_timeout,
            prefix,
            args.pytest_args,
            args.pytest_dir,
        )
        print(
            f"{Path(rel).name}: {result.passed} passed, {result.failed} failed, {result.errors} errors, "
            f"{result.skipped} skipped ({result.seconds}s)",
            flush=True,
        )
        results.append(result)
    print()
    print(render(results, args.top))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
