"""Without an optional extra, its features say which one to install, in one line.

A core install (``pip install crawldedup``) lacks the extras' packages; each is made absent here
in a fresh interpreter (``sys.modules[name] = None`` makes its import fail as a missing package).
"""

import subprocess
import sys

import pytest

#: (package made absent, code that needs it, the extra the message must name)
CASES = [
    ("orjson", "from crawldedup import ServiceClient", "service"),
    ("orjson", "from crawldedup.service import ServiceClient", "service"),
    ("httpx", "from crawldedup import ServiceClient; ServiceClient('http://127.0.0.1:1')", "service"),
    ("httpx", "from crawldedup import AsyncServiceClient; AsyncServiceClient('http://127.0.0.1:1')", "service"),
    ("prometheus_client", "import crawldedup.metrics", "metrics"),
    ("selectolax", "from crawldedup.content import page_text; page_text('<p>x</p>')", "content"),
]


@pytest.mark.parametrize("absent, code, extra", CASES, ids=[f"{case[0]}:{case[2]}-{i}" for i, case in enumerate(CASES)])
def test_a_missing_extra_is_named_in_one_line(absent: str, code: str, extra: str) -> None:
    script = f"import sys\nsys.modules[{absent!r}] = None\n{code}\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: "), result.stderr
    assert f"pip install 'crawldedup[{extra}]'" in last_line, last_line
    assert absent in last_line, last_line
