"""The options' types and the parser of the ``crawldedup`` command: each value checked as its
setting is, and a bad one a usage error of one line (exit code 2)."""

from __future__ import annotations

import argparse
import textwrap
from typing import NoReturn, Optional

from .._checks import ERROR_RATE_RULE, check_error_rate, check_name
from ..canonical import InvalidURL, canonicalize
from ..config import SETTINGS
from ..stores.factory import STRATEGY_CHOICES, strategy_name
from ..stores.service import check_service_url
from ..stores.urls import check_postgres_url, redis_url_refusal
from .exits import EXIT_CODES, usage_error

#: The help of the input files of the commands that read lines.
INPUTS_HELP = "files of URLs, one per line, plain or gzip (detected); '-' or none: stdin"
#: The help of ``--base``.
BASE_HELP = "resolve relative links against this URL (a line 'BASE<TAB>LINK' carries its own base)"


def positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 3600], got {text!r}")
    return value


def jobs(text: str) -> int:
    if text.strip() == "0":
        return 0
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer, or 0 for the cores available, got {text!r}"
        ) from None


def probability(text: str) -> float:
    try:
        return check_error_rate(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {ERROR_RATE_RULE}, got {text!r}") from None


def days(text: str) -> float:
    setting = SETTINGS["ttl_days"]
    try:
        value = float(text)
        setting.check(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {setting.allowed}, got {text!r}") from None
    return value


def strategy(text: str) -> str:
    try:
        return strategy_name(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be one of {STRATEGY_CHOICES}, got {text!r}") from None


def integer_between(text: str, low: int, high: Optional[int], rule: str) -> int:
    """``text`` as an integer in ``[low, high]`` (no upper bound when ``high`` is None).

    :raises argparse.ArgumentTypeError: ``must be <rule>, got <text>``.
    """
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


def bits(text: str) -> int:
    return integer_between(text, 0, 64, "a number of bits in [0, 64]")


def _name(kind: str, text: str) -> str:
    try:
        return check_name(kind, text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def namespace_name(text: str) -> str:
    return _name("a namespace", text)


def round_name(text: str) -> str:
    return _name("a round", text)


def redis_url(text: str) -> str:
    refusal = redis_url_refusal(text)
    if refusal:
        raise argparse.ArgumentTypeError(refusal)
    return text


def postgres_url(text: str) -> str:
    try:
        return check_postgres_url("the value", text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def service_url(text: str) -> str:
    try:
        return check_service_url(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("service_url ")) from None


def file_path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must be a file path, got ''")
    return text


def port(text: str) -> int:
    return integer_between(text, 0, 65535, "a port number in [0, 65535] (0: a free one)")


def base_url(text: str) -> str:
    try:
        canonicalize(text)
    except InvalidURL as exc:
        raise argparse.ArgumentTypeError(f"must be an absolute http(s) URL ({exc})") from None
    return text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (a CLIError), not its usage text and exit."""

    def error(self, message: str) -> NoReturn:
        raise usage_error(self.prog.partition(" ")[2] or None, message)


class Formatter(argparse.HelpFormatter):
    """Wraps descriptions as usual, but keeps a text of several lines (the exit codes) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def exit_codes_epilog() -> str:
    rows = [
        textwrap.fill(
            meaning, width=78, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7, break_on_hyphens=False
        )
        for code, meaning in EXIT_CODES
    ]
    return "exit codes:\n" + "\n".join(rows) + "\n\nSee docs/cli.md."
