"""The CLI with the exact tier: filter's default and --local-tier, state files of the Bloom filter
alone going on as they were made, info, merge and stats of exact states, damaged runs named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

COMMAND = [sys.executable, "-m", "crawldedup"]


def lines(start: int, stop: int) -> bytes:
    return "".join(f"https://shop.example/item/{i}\n" for i in range(start, stop)).encode()


def run(args: List[str], cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], input=stdin, capture_output=True, cwd=cwd, timeout=120)


def one_line_error(result: subprocess.CompletedProcess, code: int, *words: str) -> None:
    err = result.stderr.decode()
    assert result.returncode == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err


def test_the_default_is_exact_and_a_second_run_prints_nothing(tmp_path):
    first = run(["filter", "--state", "s.bloom", "--jobs", "1"], tmp_path, lines(0, 3_000))
    assert first.returncode == 0, first.stderr.decode()
    assert len(first.stdout.splitlines()) == 3_000
    summary = first.stderr.decode()
    assert "false-positive loss            0   pages (the exact tier" in summary
    assert "exact tier                 3,000   pages in" in summary
    assert (tmp_path / "s.bloom.exact" / "MANIFEST").is_file()
    again = run(["filter", "--state", "s.bloom", "--jobs", "1"], tmp_path, lines(0, 3_500))
    assert len(again.stdout.splitlines()) == 500


def test_a_state_file_of_the_bloom_filter_alone_goes_on_as_local(tmp_path):
    made = run(["filter", "--state", "old.bloom", "--strategy", "local", "--jobs", "1"], tmp_path, lines(0, 1_000))
    assert made.returncode == 0 and not (tmp_path / "old.bloom.exact").exists()
    again = run(["filter", "--state", "old.bloom", "--jobs", "1"], tmp_path, lines(0, 1_200))
    assert again.returncode == 0, again.stderr.decode()
    assert len(again.stdout.splitlines()) == 200
    assert "(estimate; filter false-positive rate now" in again.stderr.decode()  # what it may lose, said
    assert not (tmp_path / "old.bloom.exact").exists()
    refused = run(["filter", "--state", "old.bloom", "--strategy", "exact"], tmp_path, lines(0, 10))
    one_line_error(refused, 3, "old.bloom: made with the Bloom filter alone", "strategy local")


def test_local_tier_chooses_what_stands_before_a_store(tmp_path):
    bloom = run(
        ["filter", "--state", "b.bloom", "--strategy", "sqlite", "--sqlite", "c.sqlite", "--local-tier", "bloom"],
        tmp_path,
        lines(0, 2_000),
    )
    assert bloom.returncode == 0, bloom.stderr.decode()
    assert not (tmp_path / "b.bloom.exact").exists()
    exact = run(
        ["filter", "--state", "e.bloom", "--strategy", "sqlite", "--sqlite", "d.sqlite"], tmp_path, lines(0, 2_000)
    )
    assert exact.returncode == 0, exact.stderr.decode()
    assert len(exact.stdout.splitlines()) == 2_000 and (tmp_path / "e.bloom.exact").is_dir()
    wrong = run(["filter", "--strategy", "local", "--local-tier", "exact"], tmp_path, lines(0, 10))
    one_line_error(wrong, 2, "local_tier", "does not go with the local strategy")


def test_info_merge_and_stats_of_exact_states(tmp_path):
    for name, start, stop in (("a", 0, 2_000), ("b", 1_000, 3_000)):
        made = run(
            ["filter", "--state", f"{name}.bloom", "--ttl-days", "0", "--jobs", "1"], tmp_path, lines(start, stop)
        )
        assert made.returncode == 0, made.stderr.decode()
    info = run(["info", "a.bloom"], tmp_path).stdout.decode()
    assert "exact tier        a.bloom.exact: format v1" in info
    assert "pages             2,000 (exact)" in info
    merged = run(["merge", "a.bloom", "b.bloom", "-o", "m.bloom"], tmp_path)
    assert merged.stderr.decode().strip() == (
        "crawldedup merge: wrote m.bloom from 2 filters, and its exact tier m.bloom.exact (3,000 pages)"
    )
    after = run(["filter", "--state", "m.bloom", "--ttl-days", "0", "--jobs", "1"], tmp_path, lines(0, 3_100))
    assert len(after.stdout.splitlines()) == 100
    stats = run(["stats", "--state", "m.bloom"], tmp_path).stdout.decode()
    assert "3,100 (exact)" in stats and "0 new pages taken for seen (the exact tier confirms every hit)" in stats
    run(["filter", "--state", "p.bloom", "--strategy", "local", "--ttl-days", "0"], tmp_path, lines(0, 10))
    mixed = run(["merge", "a.bloom", "p.bloom", "-o", "x.bloom"], tmp_path)
    one_line_error(mixed, 3, "cannot merge p.bloom (a Bloom filter alone) with a.bloom")


def test_a_damaged_run_is_one_line_naming_it(tmp_path):
    # 5,000 pages with a 1,000-key buffer would spill into run files; the CLI's buffer is large,
    # so a merge (which writes one run per generation) makes one.
    run(["filter", "--state", "s.bloom", "--ttl-days", "0", "--jobs", "1"], tmp_path, lines(0, 5_000))
    merged = run(["merge", "s.bloom", "-o", "m.bloom"], tmp_path)
    assert merged.returncode == 0, merged.stderr.decode()
    (victim,) = (tmp_path / "m.bloom.exact").glob("run-*.run")
    data = bytearray(victim.read_bytes())
    data[-30] ^= 0x40
    victim.write_bytes(bytes(data))
    for args in (["info", "m.bloom"], ["filter", "--state", "m.bloom", "--ttl-days", "0"]):
        one_line_error(run(args, tmp_path, lines(0, 10)), 3, victim.name, "corrupted run: checksum")
