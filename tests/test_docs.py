"""Every code block of README.md, CONTRIBUTING.md and docs/*.md runs as written.

Sybil finds a page's fenced blocks and runs its Python, checking the output of each ``>>>``
line as doctest does. This module adds the shell blocks and what a block needs, read from the
words after the fence's language (renderers show the language only); CONTRIBUTING.md, "Code
blocks in the docs", is the reader's version of these rules:

``python``
    runs; a block that starts with ``>>>`` checks each line's output.
``console``
    each ``$ `` command runs in bash and must print the lines below it (stdout and stderr); it
    may exit non-zero only when it shows what it prints.
``sh``
    runs in bash and must exit 0.
``text``, ``toml``, ``json``, ``sql``
    not code (diagrams, formulas, what a command prints elsewhere, a query with parameters);
    TOML and JSON must parse.
``server=redis``, ``server=service``
    the Redis the tests start (conftest ``redis_url``) answers at ``127.0.0.1:6379`` in the
    block, a ``crawldedup serve`` of the test's own at ``127.0.0.1:8707``.
``needs=MODULE``
    runs where MODULE imports (an extra that not every Python has: crawlee needs 3.10); elsewhere
    it is checked as a skipped block is.
``slow``
    the page's test is marked ``slow``.
``skip: REASON``
    not run, for the reason given; its Python must compile and its shell parse (``bash -n``).

One test per page: its blocks run in order, in one namespace and one fresh working directory
(``examples/`` linked into it), as a reader following the page in one Python session and one
terminal would. Output is compared with doctest's ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``
(``...`` stands for any text), and durations and rates (``1.49 s``, ``672,895 lines/s``) are
read as ``<time>`` on both sides: they differ on every run.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from sybil import Document, Example, Region
from sybil.evaluators.doctest import DocTestEvaluator
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.abstract.doctest import DocTestStringParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

RUN = ("python", "console", "sh")
SHOWN = ("text", "toml", "json", "sql")
#: The address a block marked ``server=NAME`` writes for that server.
ADDRESSES = {"redis": "127.0.0.1:6379", "service": "127.0.0.1:8707"}
#: The whole line after a fence: the language, then the block's options.
INFO = re.compile(r"(?P<language>[^\s`]*)[ \t]*(?P<options>[^\n]*?)[ \t]*\n")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: A duration or a rate: different on every run.
TIME = re.compile(r"\d[\d,.]*\s?(?:ms|µs|us|ns|s|[A-Za-z]*/s)\b")
COMMAND_SECONDS = 600


@dataclass
class Block:
    language: str
    line: int
    region: Region
    server: Optional[str] = None
    needs: Optional[str] = None
    slow: bool = False
    skip: Optional[str] = None

    @property
    def source(self) -> str:
        return str(self.region.lexemes["source"])


def read_blocks(text: str, page: Path) -> List[Block]:
    """The page's fenced blocks, their info strings read; a ValueError names a block that breaks the rules."""
    document = Document(text, str(page))
    blocks = []
    for region in RawFencedCodeBlockLexer(info_pattern=INFO)(document):
        line = text.count("\n", 0, region.start) + 1
        where = f"{page.name}:{line}"
        block = Block(region.lexemes["language"], line, region)
        if block.language not in RUN + SHOWN:
            raise ValueError(f"{where}: a block's language is one of {', '.join(RUN + SHOWN)}, not {block.language!r}")
        options, skipped, reason = region.lexemes["options"].partition("skip:")
        if skipped:
            block.skip = reason.strip()
            if not block.skip:
                raise ValueError(f"{where}: skip: needs its reason")
        for option in options.split():
            name, _, value = option.partition("=")
            if name == "server" and value in ADDRESSES:
                block.server = value
            elif name == "needs" and value:
                block.needs = value
            elif option == "slow":
                block.slow = True
            else:
                raise ValueError(f"{where}: unknown option {option!r} (server=NAME, needs=MODULE, slow, skip: REASON)")
        if block.language in SHOWN and (block.server or block.needs or block.slow or block.skip):
            raise ValueError(f"{where}: a {block.language} block is not run: it takes no options")
        blocks.append(block)
    return blocks


def page_param(page: Path) -> object:
    """The page as the test's parameter, marked ``slow`` and ``redis`` as its blocks ask (a page
    that breaks the rules, or is missing, is left to its test to report)."""
    try:
        blocks = read_blocks(page.read_text(encoding="utf-8"), page)
    except (OSError, ValueError):
        blocks = []
    marks = [pytest.mark.slow] if any(block.slow for block in blocks) else []
    if any(block.server and not block.skip for block in blocks):
        marks.append(pytest.mark.redis)  # deselected where no server runs (the wheel builds, -m "not redis")
    return pytest.param(page, id=page.relative_to(ROOT).as_posix(), marks=marks)


class Shell:
    """Runs a page's shell blocks in its working directory, with this interpreter's ``python`` and ``crawldedup``."""

    def __init__(self, workdir: Path, tools: Path) -> None:
        self.workdir = workdir
        tools.mkdir()
        (tools / "python").symlink_to(sys.executable)
        path = os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        self.env = {**os.environ, "PATH": path}

    def run(self, command: str) -> Tuple[int, str]:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_SECONDS,
        )
        return done.returncode, done.stdout

    def parses(self, source: str) -> Optional[str]:
        code, output = self.run(f"bash -n <<'CRAWLDEDUP_BLOCK'\n{source}\nCRAWLDEDUP_BLOCK")
        return None if code == 0 else output


def transcript(source: str) -> List[Tuple[str, str]]:
    """``(command, output)`` pairs of a console block; a command's lines ending in ``\\`` go on."""
    steps: List[Tuple[str, List[str]]] = []
    going_on = False
    for line in source.splitlines():
        if going_on:
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        elif line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"a console block starts with a `$ ` command, not {line!r}")
        going_on = line.endswith("\\")
    return [(command, "".join(out + "\n" for out in output)) for command, output in steps]


def without_time(text: str) -> str:
    return TIME.sub("<time>", text)


class PageRun:
    """Evaluates one page's blocks in order: Python through Sybil, shell through :class:`Shell`."""

    def __init__(self, page: Path, text: str, shell: Shell) -> None:
        self.page = page
        self.shell = shell
        self.document = Document(text, str(page))
        self.document.namespace["__name__"] = "__main__"
        self.doctests = DocTestStringParser(DocTestEvaluator(FLAGS))
        self.python = PythonEvaluator()
        self.checker = doctest.OutputChecker()

    def regions(self, block: Block) -> List[Region]:
        """The regions Sybil evaluates for ``block``: one per ``>>>`` example, or the whole block."""
        region, source = block.region, block.region.lexemes["source"]
        if block.language == "python" and source.startswith(">>>"):
            examples = list(self.doctests(source, str(self.page)))
            for example in examples:
                example.adjust(region, source)
            return examples
        region.parsed = source
        region.evaluator = self.evaluator(block)
        return [region]

    def evaluator(self, block: Block):
        if block.language == "python":
            return self.python
        return self.console if block.language == "console" else self.sh

    def console(self, example: Example) -> Optional[str]:
        for command, want in transcript(example.parsed):
            code, got = self.shell.run(command)
            if not self.checker.check_output(without_time(want), without_time(got), FLAGS):
                return f"$ {command}\n" + self.checker.output_difference(doctest.Example(command, want), got, FLAGS)
            if code != 0 and not want:
                return f"$ {command}\nexited {code} and its block shows no output:\n{got}"
        return None

    def sh(self, example: Example) -> Optional[str]:
        code, got = self.shell.run(example.parsed)
        return None if code == 0 else f"exited {code}:\n{got}"

    def check_skipped(self, block: Block) -> None:
        where = f"{self.page.name}:{block.line}"
        if block.language == "python":
            source = block.source
            if source.startswith(">>>"):
                source = "\n".join(example.source for example in doctest.DocTestParser().get_examples(source))
            compile(source, where, "exec", dont_inherit=True)
            return
        commands = (
            [command for command, _ in transcript(block.source)] if block.language == "console" else [block.source]
        )
        problem = self.shell.parses("\n".join(commands))
        assert problem is None, f"{where}: skipped, but its shell does not parse: {problem}"

    def check_data(self, block: Block) -> None:
        try:
            if block.language == "toml":
                tomllib.loads(block.source)
            elif block.language == "json":
                json.loads(block.source)
        except ValueError as error:
            raise AssertionError(
                f"{self.page.name}:{block.line}: the {block.language} does not parse: {error}"
            ) from None

    def run(self, blocks: List[Block]) -> None:
        """Evaluates ``blocks`` (read from this page's text) in order."""
        for block in blocks:
            if block.language in SHOWN:
                self.check_data(block)
            elif block.skip or (block.needs and importlib.util.find_spec(block.needs) is None):
                self.check_skipped(block)
            else:
                for region in self.regions(block):
                    self.document.add(region)
        for example in self.document.examples():
            example.evaluate()


def with_servers(text: str, blocks: List[Block], addresses: Dict[str, str]) -> str:
    """``text`` with each ``server=NAME`` block's documented address replaced by the test's server."""
    pieces, done = [], 0
    for block in blocks:
        if block.server and not block.skip:
            start, end = block.region.start, block.region.end
            pieces += [text[done:start], text[start:end].replace(ADDRESSES[block.server], addresses[block.server])]
            done = end
    return "".join(pieces) + text[done:]


def run_page(page: Path, workdir: Path, addresses: Dict[str, str]) -> None:
    """Runs ``page``'s blocks in this process, in ``workdir``, the servers at ``addresses``."""
    os.chdir(workdir)
    text = page.read_text(encoding="utf-8")
    text = with_servers(text, read_blocks(text, page), addresses)
    PageRun(page, text, Shell(workdir, workdir.parent / "bin")).run(read_blocks(text, page))


@pytest.mark.skipif(sys.platform == "win32", reason="the pages' shell is bash, their paths POSIX")
@pytest.mark.parametrize("page", [page_param(page) for page in PAGES])
def test_page_runs_as_written(page: Path, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Each page in an interpreter of its own, as a reader's session: what a block leaves behind
    (variables, a default Prometheus registry, the environment) stays in it."""
    from conftest import ServeProcess

    assert page.exists(), f"{page} not found (scripts/test and cibuildwheel copy it beside tests/)"
    blocks = read_blocks(page.read_text(encoding="utf-8"), page)
    needed = {block.server for block in blocks if block.server and not block.skip}
    addresses = {}
    service = None
    if "redis" in needed:
        redis_url = request.getfixturevalue("redis_url")
        addresses["redis"] = redis_url.split("//", 1)[1].split("/", 1)[0]
    if "service" in needed:
        service = ServeProcess(["--state", str(tmp_path / "service.bloom")]).start()
        addresses["service"] = service.url.split("//", 1)[1].rstrip("/")
    try:
        workdir = tmp_path / "page"
        workdir.mkdir()
        (workdir / "examples").symlink_to(ROOT / "examples")
        done = subprocess.run(
            [sys.executable, __file__, str(page), str(workdir), json.dumps(addresses)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
        )
    finally:
        if service is not None:
            service.stop()
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}{done.stderr}"


def test_the_rules_refuse_what_they_should(tmp_path: Path) -> None:
    """The checks above can fail: a wrong output, an unknown language, a skip without reason."""
    page = tmp_path / "page.md"
    shell = Shell(tmp_path, tmp_path / "bin")

    def run(text: str) -> None:
        PageRun(page, text, shell).run(read_blocks(text, page))

    run("```python\n>>> 1 + 1\n2\n```\n\n```console\n$ echo done in 1.5 s\ndone in 3.25 s\n```\n")
    with pytest.raises(AssertionError, match="3"):
        run("```python\n>>> 1 + 1\n3\n```\n")
    with pytest.raises(AssertionError, match="Expected"):
        run("```console\n$ echo two\none\n```\n")
    with pytest.raises(AssertionError, match="exited 3"):
        run("```sh\nexit 3\n```\n")
    with pytest.raises(ValueError, match="language"):
        read_blocks("```\nx\n```\n", page)
    with pytest.raises(ValueError, match="reason"):
        read_blocks("```sh skip:\nx\n```\n", page)
    with pytest.raises(AssertionError, match="does not parse"):
        run("```sh skip: needs a network\nif then fi\n```\n")
    with pytest.raises(SyntaxError):
        run("```python skip: needs a network\ndef (\n```\n")
    with pytest.raises(NameError):
        run("```python\nprint(urls)\n```\n")
    run("```python needs=crawldedup_no_such_module\nprint(urls)\n```\n")  # compiled only
    with pytest.raises(ValueError, match="unknown option"):
        read_blocks("```python server=mongodb\nx\n```\n", page)
    text = "```sh server=redis\nredis://127.0.0.1:6379/0\n```\nredis://127.0.0.1:6379/0\n"
    moved = with_servers(text, read_blocks(text, page), {"redis": "127.0.0.1:7000"})
    assert moved == text.replace("6379", "7000", 1)  # inside the block only


if __name__ == "__main__":
    try:
        run_page(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
    except Exception:
        traceback.print_exc(file=sys.stdout)
        sys.exit(1)
