"""Every subcommand of ``crawldedup`` against what its surroundings do to it: stdout closed or
full, stderr closed or full, SIGINT while it loads, as it starts and at its first output, and a
bad value for each of its options (read from the parser itself, so a new option is covered).
Each run ends with a documented exit code, one line on stderr when it fails, and no traceback.

The runs are real processes: forks of one interpreter that loaded the commands
(tests/workers/cli_forks.py), each with its own descriptors 0, 1 and 2, two at a time. The
interpreter's own start is met in fresh processes too: SIGINT while the commands load, and the
faults through the shell's redirections (``slow``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawldedup import DEFAULT_POLICY, Deduplicator, SQLiteStore
from crawldedup.cli.exits import EXIT_CODES, ExitCode
from crawldedup.cli.main import build_parser
from crawldedup.config import SETTINGS
from crawldedup.offline import Job, run_on_duckdb
from crawldedup.offline.state import history_to_state

WORKER = Path(__file__).resolve().parent / "workers" / "cli_forks.py"
#: Exit codes a run may end with: the documented ones, but a bug's.
DOCUMENTED = {int(code) for code, _ in EXIT_CODES} - {ExitCode.INTERNAL}
#: Every variable a setting is read from: unset in each run, so that the machine's own don't count.
VARIABLES = sorted({name for setting in SETTINGS.values() for name in (setting.variable, *setting.aliases)})
PAGES = [f"https://shop.example/item/{i}" for i in range(12)]
LINKS = "".join(f"{url}?utm_source=mail\n{url.replace('shop.example', 'SHOP.example:443')}#top\n" for url in PAGES)
#: SIGINT at the first output: the first write to stdout, through the streams of every command
#: or through filter's batch writer.
FIRST_OUTPUT = {"call": ["write", "flush", "write_lines"], "self": ["_Stdout", "Output"]}


class Base(NamedTuple):
    """A run of a command that works, quickly, in a directory holding the :func:`materials`."""

    argv: List[str]
    code: int = ExitCode.OK
    #: When the run must be ended with SIGINT (serve: once it listens), and so ends.
    sigint: Optional[Dict[str, Any]] = None


#: One working run of each subcommand: the fault cases change one thing of it.
BASES: Dict[str, Base] = {
    "filter": Base(["filter", "links.txt", "--state", "s.bloom", "--batch-size", "5"]),
    "canonicalize": Base(["canonicalize", "links.txt"]),
    "info": Base(["info", "made.bloom"]),
    "audit": Base(["audit", "links.txt"]),
    "content": Base(["content", "page.html", "--state", "c.bloom"]),
    "merge": Base(["merge", "made.bloom", "made2.bloom", "-o", "out.bloom"]),
    "serve": Base(["serve", "--port", "0"], sigint={"call": ["address"]}),
    "doctor": Base(
        ["doctor", "--strategy", "sqlite", "--sqlite", "d.sqlite", "--samples", "100", "--max-round-trip-ms", "60000"]
    ),
    "stats": Base(["stats", "--state", "made.bloom"]),
    "migrate": Base(["migrate", "--from-state", "made.bloom", "--to", "sqlite", "--sqlite", "m.sqlite"]),
    "offline run": Base(["offline", "run", "links.parquet", "--history", "new-history", "--new-pages", "new.parquet"]),
    "offline to-state": Base(["offline", "to-state", "h.bloom", "--history", "history"]),
    "offline from-state": Base(["offline", "from-state", "h0.bloom", "--urls", "links.txt", "--history", "history"]),
}


def subcommands() -> Dict[str, Any]:
    """Each subcommand's parser, by name, as ``crawldedup --help`` lists them; a command with
    actions of its own (``offline run``) by each action."""
    found: Dict[str, Any] = {}

    def walk(prefix: str, parser: Any) -> None:
        nested = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        if not nested:
            found[prefix.strip()] = parser
        for action in nested:
            for name, child in action.choices.items():
                walk(f"{prefix} {name}", child)

    walk("", build_parser())
    return found


@pytest.fixture(scope="module")
def materials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the base runs read: links, a page, a state file a crawl made and its twin."""
    where = tmp_path_factory.mktemp("materials")
    (where / "links.txt").write_text(LINKS)
    (where / "page.html").write_text("<html><body><p>The one page of this test.</p></body></html>\n")
    with Deduplicator("local", state=str(where / "made.bloom"), capacity=1_000) as dedup:
        dedup.claim_many(PAGES[:5])
    shutil.copy(where / "made.bloom", where / "made2.bloom")
    SQLiteStore(where / "d.sqlite", namespace="crawl", policy_digest=DEFAULT_POLICY.digest).close()  # doctor's
    # offline's: links as Parquet, the history a first run made, and a state file made from it.
    pq.write_table(pa.table({"url": LINKS.splitlines()}), where / "links.parquet")
    run_on_duckdb(Job([str(where / "links.parquet")], where / "history", where / "first.parquet"))
    history_to_state(where / "history", where / "h0.bloom", DEFAULT_POLICY)
    return where


class Result(NamedTuple):
    code: Optional[int]
    out: bytes
    err: str
    timed_out: bool


class Forks:
    """The worker that forks a run per case (tests/workers/cli_forks.py)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def run(self, cases: Sequence[Dict[str, Any]], parallel: int = 2) -> List[Result]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"cases": list(cases), "parallel": parallel}) + "\n")
        answers = json.loads(self.process.stdout.readline())
        results = []
        for case, answer in zip(cases, answers):
            cwd = Path(case["cwd"])
            out = cwd / "out" if case.get("stdout") == "out" else None
            err = cwd / "err" if case.get("stderr") == "err" else None
            results.append(
                Result(
                    answer["code"],
                    out.read_bytes() if out and out.exists() else b"",
                    err.read_text(errors="replace") if err and err.exists() else "",
                    answer["timed_out"],
                )
            )
        return results

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(scope="module")
def forks() -> Iterator[Forks]:
    worker = Forks()
    try:
        yield worker
    finally:
        worker.close()


def case(
    directory: Path,
    materials: Path,
    argv: Sequence[str],
    *,
    stdout: str = "out",
    stderr: str = "err",
    sigint: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A run in ``directory``, a fresh copy of the materials."""
    shutil.copytree(materials, directory)
    return {
        "argv": list(argv),
        "cwd": str(directory),
        "env": {**dict.fromkeys(VARIABLES), "CRAWLDEDUP_CAPACITY": "1000"},
        "stdin": "null",
        "stdout": stdout,
        "stderr": stderr,
        "sigint": sigint,
        "timeout": 60,
    }


def assert_clean(result: Result, what: str) -> None:
    """A documented exit code, no traceback, and a failure told in one line."""
    assert not result.timed_out, what
    assert result.code in DOCUMENTED, (what, result)
    assert "Traceback" not in result.err and "Exception ignored" not in result.err, (what, result.err)
    if result.code not in (ExitCode.OK, ExitCode.INVALID, ExitCode.SIGINT):
        lines = result.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("crawldedup: error: "), (what, result.err)


def test_every_subcommand_has_a_base_run():
    assert sorted(BASES) == sorted(subcommands())


#: What is done to a run, and what the run must do then (checked by test_faults).
FAULTS = ("stdout closed", "stdout full", "stderr closed", "stderr full", "sigint at start", "sigint at output")


def test_faults(forks: Forks, materials: Path, tmp_path: Path):
    cases, labels = [], []
    for name, base in BASES.items():
        cases.append(case(tmp_path / name / "base", materials, base.argv, sigint=base.sigint))
        labels.append((name, "base"))
        for fault in FAULTS:
            directory = tmp_path / name / fault.replace(" ", "-")
            if fault.startswith("stdout"):
                cases.append(case(directory, materials, base.argv, stdout=fault.split()[1], sigint=base.sigint))
            elif fault.startswith("stderr"):
                cases.append(case(directory, materials, base.argv, stderr=fault.split()[1], sigint=base.sigint))
            elif fault == "sigint at start":
                started = subcommands()[name].get_default("run").__name__  # the command's own function
                cases.append(case(directory, materials, base.argv, sigint={"call": [started]}))
            else:
                cases.append(case(directory, materials, base.argv, sigint=base.sigint or FIRST_OUTPUT))
            labels.append((name, fault))
    results = dict(zip(labels, forks.run(cases)))
    for (name, fault), result in results.items():
        check_fault(name, fault, result, results[name, "base"])


def check_fault(name: str, fault: str, result: Result, base: Result) -> None:
    """What a run with ``fault`` must do, against the same run without it (``base``)."""
    assert_clean(result, f"{name}, {fault}")
    assert base.code == BASES[name].code, (name, base)
    if fault == "base":
        return
    if fault in ("stdout closed", "stdout full"):
        if base.out:  # a command that prints: one line, exit code 4
            assert result.code == ExitCode.IO, (name, fault, result)
            reason = "Bad file descriptor" if fault == "stdout closed" else "No space left on device"
            assert result.err == f"crawldedup: error: cannot write stdout: {reason}\n", (name, fault)
        else:
            assert result.code == base.code, (name, fault, result)
    elif fault in ("stderr closed", "stderr full"):  # diagnostics lost, nothing else
        assert result.code == base.code, (name, fault, result)
        assert bool(result.out) == bool(base.out), (name, fault)
    elif name != "serve":
        assert result.code == ExitCode.SIGINT, (name, fault, result)
    else:  # serve stops on SIGINT as on SIGTERM: exit code 0 (docs/service.md)
        assert result.code in (ExitCode.OK, ExitCode.SIGINT), (name, fault, result)


def test_filter_loses_no_page_to_a_fault(forks: Forks, materials: Path, tmp_path: Path):
    """Each faulty run, then a rerun on its state file: every page printed once, in one of them."""
    base = BASES["filter"]
    faults = {
        "stdout closed": {"stdout": "closed"},
        "stdout full": {"stdout": "full"},
        "stderr closed": {"stderr": "closed"},
        "stderr full": {"stderr": "full"},
        "sigint at output": {"sigint": FIRST_OUTPUT},
    }
    first = forks.run([case(tmp_path / f, materials, base.argv, **how) for f, how in faults.items()])
    again = forks.run(
        [{**case(tmp_path / f / "again", materials, base.argv), "cwd": str(tmp_path / f)} for f in faults]
    )
    for fault, before, after in zip(faults, first, again):
        printed = before.out.decode().split() + after.out.decode().split()
        assert sorted(printed) == sorted(PAGES), (fault, before, after)


def bad_values(action: Any) -> List[str]:
    """Values an option should refuse, as a careless user types them."""
    if action.nargs == 0:  # a flag: given a value it takes none
        return ["=x"]
    return ["", "-1", "0", "nan", "x" * 300, os.fsdecode(b"\xff")]


def options() -> Iterator[Any]:
    """(command, option string, action) of every option and argument of every subcommand."""
    for name, parser in subcommands().items():
        for action in parser._actions:
            if action.dest == "help":
                continue
            yield name, (max(action.option_strings, key=len) if action.option_strings else None), action


def _with_value(name: str, base: Sequence[str], option: Optional[str], action: Any, value: str) -> List[str]:
    """The base run of command ``name`` with ``value`` for ``option`` (for a positional: in
    place of the base's first one, which follows the command's words)."""
    argv = list(base)
    words = len(name.split())
    if option is None:
        given = len(argv) > words and not argv[words].startswith("-")
        return [*argv[:words], value, *argv[words + given :]]
    if option in argv:  # the base's own value replaced
        at = argv.index(option)
        del argv[at : at + (1 if action.nargs == 0 else 2)]
    if value.startswith("="):
        return [*argv, option + value]
    return [*argv, option, value]


def _bad_value_cases(tmp_path: Path, materials: Path, first_only: bool) -> List[Any]:
    cases = []
    for name, option, action in options():
        values = bad_values(action)
        for i, value in enumerate(values[:1] if first_only and action.nargs != 0 else values):
            argv = _with_value(name, BASES[name].argv, option, action, value)
            directory = tmp_path / f"{name}{option or action.dest}-{i}"
            cases.append(
                ((name, option or action.dest, value), case(directory, materials, argv, sigint=BASES[name].sigint))
            )
    return cases


def _check_bad_values(cases: List[Any], results: List[Result]) -> None:
    problems = []
    for (label, _), result in zip(cases, results):
        try:
            assert_clean(result, f"{label}")
        except AssertionError as exc:
            problems.append(str(exc)[:600])
    assert not problems, "\n".join(problems)


def test_a_bad_value_of_any_option_is_one_line(forks: Forks, materials: Path, tmp_path: Path):
    cases = _bad_value_cases(tmp_path, materials, first_only=True)
    _check_bad_values(cases, forks.run([c for _, c in cases]))


@pytest.mark.slow
def test_every_bad_value_of_every_option_is_one_line(forks: Forks, materials: Path, tmp_path: Path):
    cases = _bad_value_cases(tmp_path, materials, first_only=False)
    _check_bad_values(cases, forks.run([c for _, c in cases]))


#: A fresh interpreter that raises SIGINT as it is about to import MODULE, then runs the command.
SIGINT_ON_IMPORT = """
import importlib.abc, signal, sys

class SigintOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == sys.argv[1]:
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, SigintOnImport())
from crawldedup.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    "module, argv",
    [
        ("crawldedup.cli.main", ["info", "made.bloom"]),  # as the command's package loads
        ("crawldedup.cli._args", ["info", "made.bloom"]),  # as the commands load
        ("numpy", ["canonicalize", "links.txt"]),
        ("crawldedup.cli.serve", ["stats", "--state", "made.bloom"]),
        ("crawldedup.service.server", ["serve", "--port", "0"]),  # as serve loads the service
    ],
)
def test_sigint_while_the_commands_load_ends_quietly(materials: Path, module: str, argv: List[str]):
    result = subprocess.run(
        [sys.executable, "-c", SIGINT_ON_IMPORT, module, *argv],
        cwd=materials,
        capture_output=True,
        timeout=60,
        env={name: value for name, value in os.environ.items() if name not in VARIABLES},
    )
    assert (result.returncode, result.stdout, result.stderr) == (ExitCode.SIGINT, b"", b"")


#: The faults as a shell makes them, for a fresh interpreter.
REDIRECTIONS = {
    "stdout closed": ">&-",
    "stdout full": ">/dev/full",
    "stderr closed": "2>&-",
    "stderr full": "2>/dev/full",
}


@pytest.mark.slow
def test_faults_through_the_shell(materials: Path, tmp_path: Path):
    """The faults of test_faults, each through the shell's redirection to ``python -m crawldedup``:
    what the interpreter's own start makes of a closed or full descriptor counts too."""
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    env["CRAWLDEDUP_CAPACITY"] = "1000"
    runs = []
    for name, base in BASES.items():
        if base.sigint is not None:  # serve ends on a signal at a moment only the forks can choose
            continue
        for fault in ("base", *REDIRECTIONS):
            directory = tmp_path / name / fault.replace(" ", "-")
            shutil.copytree(materials, directory)
            command = " ".join(shlex.quote(word) for word in [sys.executable, "-m", "crawldedup", *base.argv])
            runs.append(((name, fault), directory, f"{command} {REDIRECTIONS.get(fault, '')}"))
    results: Dict[Any, Result] = {}
    for start in range(0, len(runs), 2):  # two at a time
        started = [
            (
                label,
                subprocess.Popen(
                    ["sh", "-c", line],
                    cwd=directory,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                ),
            )
            for label, directory, line in runs[start : start + 2]
        ]
        for label, process in started:
            out, err = process.communicate(timeout=120)
            results[label] = Result(process.returncode, out, err.decode(errors="replace"), False)
    for (name, fault), result in results.items():
        check_fault(name, fault, result, results[name, "base"])
