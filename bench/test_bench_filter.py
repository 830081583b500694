"""``crawldedup filter`` on the 1,000,000-line example frontier, against the usual shell answers.

All three read the same file in the same run:

- ``crawldedup filter`` (canonical policy + Bloom filter file), with the compiled extension in
  one process (``cy``, ``--jobs 1``) and on the cores available (``cy-cores``, the default), and
  with the pure-Python twins (``py``, ``CRAWLDEDUP_NO_EXTENSIONS=1``, ``--jobs 1``);
- ``sort -u`` (exact string dedup, no canonicalization, ``LC_ALL=C``);
- a short Python script keeping a ``set`` of ``w3lib.url.canonicalize_url`` results (what a
  Scrapy user would write; relative ``BASE<TAB>LINK`` lines joined with ``urljoin`` first).

``test_filter_jobs`` runs ``--jobs 1`` and ``--jobs 2`` in alternating rounds on one frontier
(``CRAWLDEDUP_BENCH_LINKS`` lines, default 1,000,000) and prints the lines/s of each, their
medians, ranges and ratio, after checking that both print the same bytes. Each round also runs
the machine's ceiling for two cores: the frontier's two halves filtered at once by two
``--jobs 1`` processes that share nothing (each with its own state file), whose lines/s no
split of one run's work between two processes can beat on this machine. The figure of
docs/performance.md is the 10,000,000-line frontier (not in CI)::

    CRAWLDEDUP_BENCH_LINKS=10000000 pytest bench/test_bench_filter.py -k jobs --benchmark-only -s

Each benchmark prints, and records in ``extra_info``, the distinct pages it found next to the
true number the generator reports. Run::

    pytest bench/test_bench_filter.py --benchmark-only --benchmark-json=filter.json
    python bench/scripts/plot.py filter.json -o docs/bench-filter.png
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, NamedTuple

import pytest

from crawldedup import bloom
from crawldedup.cli._jobs import available_cores

FRONTIER_SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "frontier.py"
LINKS = 1_000_000
#: Lines of the frontier of the --jobs comparison.
JOBS_LINKS = int(os.environ.get("CRAWLDEDUP_BENCH_LINKS", str(LINKS)))
JOBS_ROUNDS = 5
PAGES = 5000
SEED = 1
# Whole-command timings of seconds each: three rounds give a median; the w3lib script takes
# about 30 s per pass on a 2-core Zen 3 VM, so it runs once.
ROUNDS = 3
SLOW_ROUNDS = 1
GROUP = "filter 1M-line frontier"

W3LIB_SCRIPT = """
import sys
from urllib.parse import urljoin
from w3lib.url import canonicalize_url

seen = set()
for line in sys.stdin:
    line = line.rstrip("\\n")
    base, tab, link = line.partition("\\t")
    try:
        seen.add(canonicalize_url(urljoin(base, link) if tab else line))
    except Exception:  # what w3lib cannot parse is not a page
        pass
sys.stdout.write("".join(url + "\\n" for url in seen))
"""


class Frontier(NamedTuple):
    path: Path
    links: int
    pages: int
    invalid: int


def _make_frontier(directory: Path, links: int) -> Frontier:
    path = directory / "frontier.txt"
    with path.open("wb") as out:
        done = subprocess.run(
            [sys.executable, str(FRONTIER_SCRIPT), "--links", str(links), "--pages", str(PAGES), "--seed", str(SEED)],
            stdout=out,
            stderr=subprocess.PIPE,
            check=True,
        )
    match = re.search(rb"(\d+) links, (\d+) distinct pages, (\d+) not web pages", done.stderr)
    assert match, done.stderr
    return Frontier(path, *(int(group) for group in match.groups()))


@pytest.fixture(scope="module")
def frontier(tmp_path_factory: pytest.TempPathFactory) -> Frontier:
    return _make_frontier(tmp_path_factory.mktemp("frontier"), LINKS)


def _children_cpu() -> float:
    """CPU seconds of the commands this process ran and waited for (with their own workers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(args: List[str], stdin_path: Path = None, env: Dict[str, str] = None) -> bytes:
    stdin = stdin_path.open("rb") if stdin_path else subprocess.DEVNULL
    try:
        done = subprocess.run(args, stdin=stdin, capture_output=True, env=env)
    finally:
        if stdin_path:
            stdin.close()
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def _record(benchmark, frontier: Frontier, label: str, distinct: int, **extra: object) -> None:
    benchmark.extra_info.update(
        label=f"{label}: {distinct:,} pages",
        lines=frontier.links,
        distinct_pages_found=distinct,
        true_pages=frontier.pages,
        not_web_pages=frontier.invalid,
        **extra,
    )
    print(
        f"\n{label}: {distinct:,} distinct pages found ({frontier.pages:,} true, "
        f"{frontier.links:,} lines, {frontier.invalid:,} of them not web pages)"
    )


#: (build, --jobs): one process, and the default (the cores available) for the compiled build.
IMPLS = [pytest.param("py", "1", id="py")]
if bloom.HAS_EXTENSION:
    IMPLS[:0] = [
        pytest.param("cy", "1", id="cy", marks=pytest.mark.cython),
        pytest.param("cy", "0", id="cy-cores", marks=pytest.mark.cython),
    ]


@pytest.mark.parametrize("impl,jobs", IMPLS)
def test_crawldedup_filter(benchmark, frontier: Frontier, impl: str, jobs: str, tmp_path: Path) -> None:
    benchmark.group = GROUP
    state = tmp_path / "state.bloom"
    env = dict(os.environ)
    env.pop("CRAWLDEDUP_NO_EXTENSIONS", None)
    if impl == "py":
        env["CRAWLDEDUP_NO_EXTENSIONS"] = "1"
    command = [
        sys.executable,
        "-m",
        "crawldedup",
        "filter",
        str(frontier.path),
        "--state",
        str(state),
        "--quiet",
        "--jobs",
        jobs,
    ]
    if jobs == "0":
        impl = f"{impl}, --jobs {available_cores()} (the default)"

    def fresh_state() -> None:
        state.unlink(missing_ok=True)
        shutil.rmtree(f"{state}.exact", ignore_errors=True)

    out = benchmark.pedantic(_run, args=(command,), kwargs={"env": env}, setup=fresh_state, rounds=ROUNDS, iterations=1)
    distinct = out.count(b"\n")
    _record(benchmark, frontier, f"crawldedup filter [{impl}]", distinct, state_file_bytes=state.stat().st_size)
    # Canonicalization finds the true pages; the Bloom filter may lose a few to false positives.
    assert frontier.pages * 0.99 <= distinct <= frontier.pages


def test_sort_u(benchmark, frontier: Frontier) -> None:
    if shutil.which("sort") is None:
        pytest.skip("no sort(1) on this system")
    benchmark.group = GROUP
    env = dict(os.environ, LC_ALL="C")
    out = benchmark.pedantic(
        _run, args=(["sort", "-u", str(frontier.path)],), kwargs={"env": env}, rounds=ROUNDS, iterations=1
    )
    _record(benchmark, frontier, "sort -u (exact strings)", out.count(b"\n"))


def test_python_set_of_w3lib_canonicalize_url(benchmark, frontier: Frontier) -> None:
    pytest.importorskip("w3lib")
    benchmark.group = GROUP
    out = benchmark.pedantic(
        _run,
        args=([sys.executable, "-c", W3LIB_SCRIPT],),
        kwargs={"stdin_path": frontier.path},
        rounds=SLOW_ROUNDS,
        iterations=1,
    )
    _record(benchmark, frontier, "Python set of w3lib canonicalize_url", out.count(b"\n"))


@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the figure is the compiled extension's")
def test_filter_jobs(benchmark, tmp_path: Path) -> None:
    """``--jobs 2`` against ``--jobs 1`` on one frontier, rounds alternating, same bytes out."""
    source = _make_frontier(tmp_path, JOBS_LINKS)
    halves = _halves(source.path, source.links)
    rates: Dict[int, List[float]] = {1: [], 2: []}
    cpu: Dict[int, List[float]] = {1: [], 2: []}  # ns of CPU a line, the command and its workers together
    ceiling: List[float] = []  # lines/s of the two halves filtered at once
    outputs: Dict[int, bytes] = {}
    env = {key: value for key, value in os.environ.items() if key != "CRAWLDEDUP_NO_EXTENSIONS"}

    def command(path: Path, jobs: int, state: Path) -> List[str]:
        state.unlink(missing_ok=True)
        return [
            sys.executable,
            "-m",
            "crawldedup",
            "filter",
            str(path),
            "--state",
            str(state),
            "--quiet",
            "--jobs",
            str(jobs),
            "--capacity",
            str(max(10_000_000, JOBS_LINKS)),
        ]

    def one_round() -> None:
        for jobs in (1, 2):
            started, used = time.perf_counter(), _children_cpu()
            outputs[jobs] = _run(command(source.path, jobs, tmp_path / f"jobs{jobs}.bloom"), env=env)
            rates[jobs].append(source.links / (time.perf_counter() - started))
            cpu[jobs].append((_children_cpu() - used) / source.links * 1e9)
        started = time.perf_counter()
        both = [
            subprocess.Popen(command(half, 1, tmp_path / f"half{n}.bloom"), stdout=subprocess.DEVNULL, env=env)
            for n, half in enumerate(halves)
        ]
        assert [run.wait() for run in both] == [0, 0]
        ceiling.append(source.links / (time.perf_counter() - started))

    benchmark.group = f"filter --jobs, {JOBS_LINKS:,}-line frontier"
    benchmark.pedantic(one_round, rounds=JOBS_ROUNDS, iterations=1)
    assert outputs[1] == outputs[2]
    medians = {jobs: statistics.median(values) for jobs, values in rates.items()}
    ratio = medians[2] / medians[1]
    benchmark.extra_info.update(
        lines=source.links,
        ratio=ratio,
        load=os.getloadavg()[0],
        **{f"jobs{jobs}_lines_per_s": values for jobs, values in rates.items()},
        **{f"jobs{jobs}_cpu_ns_per_line": values for jobs, values in cpu.items()},
    )
    for jobs, values in rates.items():
        print(
            f"\n--jobs {jobs}: median {medians[jobs]:,.0f} lines/s, range {min(values):,.0f} to {max(values):,.0f}; "
            f"CPU a line (all its processes) median {statistics.median(cpu[jobs]):,.0f} ns, "
            f"range {min(cpu[jobs]):,.0f} to {max(cpu[jobs]):,.0f}"
        )
    top = statistics.median(ceiling)
    benchmark.extra_info.update(ceiling_lines_per_s=ceiling, ceiling_ratio=top / medians[1])
    print(
        f"two halves at once (the ceiling): median {top:,.0f} lines/s, range {min(ceiling):,.0f} to "
        f"{max(ceiling):,.0f}, {top / medians[1]:.2f}x --jobs 1"
    )
    print(
        f"--jobs 2 / --jobs 1: {ratio:.2f}x ({source.links:,} lines, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}); {medians[2] / top:.0%} of the ceiling"
    )


@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the figure is the compiled extension's")
@pytest.mark.parametrize("jobs", ["1", "0"], ids=["jobs1", "cores"])
def test_filter_exact_against_local(benchmark, frontier: Frontier, tmp_path: Path, jobs: str) -> None:
    """The default (``exact``: the Bloom filter in front of the exact tier) against the Bloom
    filter alone (``--strategy local``) on the 1,000,000-line frontier, rounds alternating, the
    same pages out (the filter loses none of them here). The exact default is kept while the
    ratio stays at or under 1.5."""
    rates: Dict[str, List[float]] = {"exact": [], "local": []}
    cpu: Dict[str, List[float]] = {"exact": [], "local": []}
    outputs: Dict[str, bytes] = {}
    env = {key: value for key, value in os.environ.items() if key != "CRAWLDEDUP_NO_EXTENSIONS"}

    def one_round() -> None:
        for strategy in ("exact", "local"):
            state = tmp_path / f"{strategy}.bloom"
            for leftover in (state, tmp_path / f"{strategy}.bloom.exact"):
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                leftover.unlink(missing_ok=True)
            command = [sys.executable, "-m", "crawldedup", "filter", str(frontier.path), "--state", str(state)]
            command += ["--quiet", "--jobs", jobs, "--strategy", strategy]
            started, used = time.perf_counter(), _children_cpu()
            outputs[strategy] = _run(command, env=env)
            rates[strategy].append(frontier.links / (time.perf_counter() - started))
            cpu[strategy].append((_children_cpu() - used) / frontier.links * 1e9)

    benchmark.group = f"filter exact vs local, --jobs {jobs}"
    benchmark.pedantic(one_round, rounds=JOBS_ROUNDS, iterations=1)
    assert outputs["exact"] == outputs["local"]
    medians = {strategy: statistics.median(values) for strategy, values in rates.items()}
    cost = medians["local"] / medians["exact"]  # time of exact / time of local
    benchmark.extra_info.update(lines=frontier.links, cost=cost, load=os.getloadavg()[0], rates=rates, cpu=cpu)
    for strategy, values in rates.items():
        print(
            f"\n{strategy} (--jobs {jobs}): median {medians[strategy]:,.0f} lines/s, range {min(values):,.0f} to "
            f"{max(values):,.0f}; CPU a line median {statistics.median(cpu[strategy]):,.0f} ns"
        )
    print(f"exact costs {cost:.2f}x local (load average {os.getloadavg()[0]:.1f})")


def _halves(path: Path, lines: int) -> List[Path]:
    """The file's first and second halves of lines, as two files."""
    halves = [path.with_name(f"half{n}.txt") for n in (0, 1)]
    with path.open("rb") as source, halves[0].open("wb") as first, halves[1].open("wb") as second:
        for number, line in enumerate(source):
            (first if number < lines // 2 else second).write(line)
    return halves
