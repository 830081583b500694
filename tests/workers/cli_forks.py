"""Runs ``crawldedup`` commands in forks of one interpreter that loaded them (run as a script by
tests/test_cli_faults.py, never imported): each run is a real process with its own descriptors
0, 1 and 2, without paying for the interpreter's start and the commands' imports again.

Reads one JSON request a line on stdin, ``{"cases": [CASE, ...], "parallel": N}``, runs its
cases, N at a time, and answers with one JSON line on stdout, the list of their results::

    CASE: {"argv": [...], "cwd": DIR, "env": {NAME: VALUE or null},
           "stdin": S, "stdout": S, "stderr": S, "sigint": null or SIGINT, "timeout": SECONDS}
    SIGINT: {"call": [FUNCTION, ...], "self": [CLASS, ...]} or {"import": MODULE}
    result: {"code": EXIT_CODE, "timed_out": false}

where each S is ``"closed"`` (the descriptor closed, as ``>&-`` leaves it), ``"full"``
(``/dev/full``), ``"null"`` (``/dev/null``) or a file path (read for stdin, else created).
A child builds ``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` as the interpreter's start
does (None for a closed descriptor), runs ``crawldedup.cli.main(argv)``, and exits as the
interpreter does after it: stdout and stderr flushed, 120 when that fails, an exception that
escaped printed with its traceback (exit code 1). ``sigint`` raises SIGINT in the child at a
moment of its run: when a function of one of those names in a ``crawldedup`` module (a method
of one of those classes) is first called, or when a module is first imported.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import signal
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

import crawldedup.cli
from crawldedup.cli.main import build_parser

build_parser()  # every command loaded before the first fork


def _descriptor(fd: int, spec: str) -> None:
    if spec == "closed":
        os.close(fd)
        return
    if spec == "full":
        opened = os.open("/dev/full", os.O_WRONLY)
    elif spec == "null":
        opened = os.open(os.devnull, os.O_RDWR)
    elif fd == 0:
        opened = os.open(spec, os.O_RDONLY)
    else:
        opened = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(opened, fd)
    os.close(opened)


def _standard_streams(specs: Dict[str, str]) -> None:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` as the interpreter's start makes them."""
    sys.stdin = None if specs["stdin"] == "closed" else open(0, encoding="utf-8", closefd=False)  # type: ignore[assignment]
    sys.stdout = None if specs["stdout"] == "closed" else open(1, "w", encoding="utf-8", closefd=False)  # type: ignore[assignment]
    sys.stderr = (  # type: ignore[assignment]
        None
        if specs["stderr"] == "closed"
        else open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    )


class _SigintOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, module: str) -> None:
        self.module = module

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == self.module:
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None


def _sigint_on_call(functions: List[str], classes: Optional[List[str]]) -> None:
    """SIGINT when a function of ``crawldedup`` named one of ``functions`` is first called (a
    method of one of ``classes``, when given)."""

    def profile(frame: Any, event: str, arg: Any) -> None:
        if (
            event == "call"
            and frame.f_code.co_name in functions
            and frame.f_globals.get("__name__", "").startswith("crawldedup")
            and (classes is None or type(frame.f_locals.get("self")).__name__ in classes)
        ):
            sys.setprofile(None)
            signal.raise_signal(signal.SIGINT)

    sys.setprofile(profile)


def _child(case: Dict[str, Any]) -> int:
    os.chdir(case["cwd"])
    for name, value in (case.get("env") or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    specs = {name: case.get(name, "null") for name in ("stdin", "stdout", "stderr")}
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        _descriptor(fd, specs[name])
    _standard_streams(specs)
    sigint: Optional[Dict[str, str]] = case.get("sigint")
    if sigint and "import" in sigint:
        sys.meta_path.insert(0, _SigintOnImport(sigint["import"]))
    if sigint and "call" in sigint:
        _sigint_on_call(sigint["call"], sigint.get("self"))
    try:
        code = crawldedup.cli.main(case["argv"])
    except BaseException:  # what the interpreter does with an exception that escaped
        sys.setprofile(None)
        if sys.stderr is not None:
            traceback.print_exc()
        code = 1
    sys.setprofile(None)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            code = 120
    return code


def _start(case: Dict[str, Any]) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child)
        code = 1
        try:
            # SIGINT as a fresh interpreter has it, whatever this worker inherited (ignored, when
            # the tests run in the background of a shell without job control).
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
            code = _child(case)
        except BaseException:  # the worker's own failure: told on the run's stderr
            os.write(2, traceback.format_exc().encode())
        finally:
            os._exit(code)
    return pid


def _run_all(cases: List[Dict[str, Any]], parallel: int) -> List[Dict[str, Any]]:
    """Run ``cases``, at most ``parallel`` at a time; their answers in order."""
    results: List[Optional[Dict[str, Any]]] = [None] * len(cases)
    running: Dict[int, Tuple[int, float]] = {}  # pid -> (case, deadline)
    waiting = list(range(len(cases)))
    while waiting or running:
        while waiting and len(running) < parallel:
            index = waiting.pop(0)
            running[_start(cases[index])] = (index, time.monotonic() + cases[index].get("timeout", 60))
        for pid, (index, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                results[index] = {"code": os.waitstatus_to_exitcode(status), "timed_out": False}
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                results[index] = {"code": None, "timed_out": True}
            else:
                continue
            del running[pid]
        time.sleep(0.001)
    return [result for result in results if result is not None]


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(_run_all(request["cases"], request.get("parallel", 1))), flush=True)


if __name__ == "__main__":
    main()
