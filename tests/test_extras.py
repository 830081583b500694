"""Without an optional extra, its features say which one to install, in one line.

A core install (``pip install crawldedup``) lacks the extras' packages; each is made absent here
in a fresh interpreter (``sys.modules[name] = None`` makes its import fail as a missing package).
"""

import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

import pytest

#: (package made absent, code that needs it, the extra the message must name)
CASES = [
    ("orjson", "from crawldedup import ServiceClient", "service"),
    ("orjson", "from crawldedup.service import ServiceClient", "service"),
    ("httpx", "from crawldedup import ServiceClient; ServiceClient('http://127.0.0.1:1')", "service"),
    ("httpx", "from crawldedup import AsyncServiceClient; AsyncServiceClient('http://127.0.0.1:1')", "service"),
    (
        "httpx",
        "from crawldedup import Deduplicator; Deduplicator('service', service_url='http://127.0.0.1:1')",
        "service",
    ),
    ("prometheus_client", "import crawldedup.metrics", "metrics"),
    ("selectolax", "from crawldedup.content import page_text; page_text('<p>x</p>')", "content"),
    ("scrapy", "import crawldedup.scrapy", "scrapy"),
    ("scrapy", "import crawldedup.integrations.scrapy", "scrapy"),
    ("crawlee", "import crawldedup.integrations.crawlee", "crawlee"),
    ("pyarrow", "import crawldedup.arrow", "arrow"),
    ("pyarrow", "import crawldedup.integrations.polars", "engines"),
    ("polars", "from crawldedup.integrations.polars import url_columns; url_columns()", "engines"),
    ("duckdb", "from crawldedup.integrations.duckdb import register; register(None)", "engines"),
    ("pyspark", "from crawldedup.integrations.spark import pages_of; pages_of(None)", "engines"),
    (
        "psycopg",
        "from crawldedup import PostgresStore; PostgresStore('postgresql://h/db', namespace='n', policy_digest='0'*16)",
        "postgres",
    ),
    (
        "psycopg",
        "from crawldedup import Deduplicator; Deduplicator('postgres', postgres_url='postgresql://h/db')",
        "postgres",
    ),
]
#: Extras that no feature needs alone: hiredis only speeds redis-py up; test and bench are ours.
NOT_FEATURES = {"hiredis", "test", "bench"}


def test_every_extra_has_a_case():
    with open(Path(__file__).resolve().parent.parent / "pyproject.toml", "rb") as file:
        extras = set(tomllib.load(file)["project"]["optional-dependencies"])
    assert extras - NOT_FEATURES == {extra for _, _, extra in CASES}


@pytest.mark.parametrize("absent, code, extra", CASES, ids=[f"{case[0]}:{case[2]}-{i}" for i, case in enumerate(CASES)])
def test_a_missing_extra_is_named_in_one_line(absent: str, code: str, extra: str) -> None:
    script = f"import sys\nsys.modules[{absent!r}] = None\n{code}\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: "), result.stderr
    assert f"pip install 'crawldedup[{extra}]'" in last_line, last_line
    assert absent in last_line, last_line


#: The commands that need an extra: the package made absent, the command, what the line says
#: needs it, and the extra the line must name.
COMMANDS = [
    ("httptools", ["serve", "--port", "0"], "crawldedup serve", "service"),
    ("prometheus_client", ["serve", "--port", "0"], "crawldedup serve", "service"),
    ("selectolax", ["content", "-"], "page_text", "content"),
    (
        "psycopg",
        ["filter", "--strategy", "postgres", "--postgres-url", "postgresql://h/db", "--state", "s.bloom"],
        "the postgres store",
        "postgres",
    ),
    (
        "httpx",
        ["filter", "--strategy", "service", "--service-url", "http://127.0.0.1:1", "--state", "s.bloom"],
        "the service store",
        "service",
    ),
]


@pytest.mark.parametrize("absent, argv, feature, extra", COMMANDS, ids=[f"{case[1][0]}-{case[0]}" for case in COMMANDS])
def test_a_command_without_its_extra_names_the_package_in_one_line(tmp_path: Path, absent, argv, feature, extra):
    script = f"import sys\nsys.modules[{absent!r}] = None\nfrom crawldedup.cli import main\nsys.exit(main({argv!r}))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, input="", capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (
        2,
        f"crawldedup: error: {feature} needs {absent}: pip install 'crawldedup[{extra}]'\n",
    )
    assert not (tmp_path / "s.bloom").exists()
