"""Policy files (docs/canonical-policy.md, "Policy files"): a canonical policy written down, in
TOML or JSON, with its per-host rules.

::

    format = 1
    base = "v3"                      # the named policy it starts from: v1, v2 or v3

    [options]                        # fields of CanonicalPolicy that replace the base's
    strip_www = true

    [[host]]                         # a rule: this host and every host under it
    match = "news.example.com"
    drop_params = ["sid"]            # dropped here, on top of the policy's list
    keep_params = ["ref"]            # never dropped here

A file is read whole into a :class:`CanonicalPolicy`; what it holds, not how it is written
(comments, order, spacing), makes the policy's digest.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Union

from .policy import POLICIES, CanonicalPolicy
from .rules import RULE_OPTIONS, HostRule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 and 3.10
    import tomli as tomllib

__all__ = ["POLICY_FILE_FORMAT", "PolicyFileError", "load_policy_file", "policy_file_text", "read_policy"]

#: The version of the policy file format this library reads and writes.
POLICY_FILE_FORMAT = 1
#: The fields of CanonicalPolicy that ``[options]`` may set.
OPTION_FIELDS = tuple(f.name for f in fields(CanonicalPolicy) if f.name not in ("version", "host_rules"))
_RULE_FIELDS = ("match", "drop_params", "drop_prefixes", "keep_params", *RULE_OPTIONS)
_TOP_KEYS = ("format", "base", "options", "host")


class PolicyFileError(ValueError):
    """A policy file that cannot be read or does not describe a policy; the message names the file."""


def read_policy(document: Mapping[str, Any]) -> CanonicalPolicy:
    """The policy a parsed policy file describes.

    :raises ValueError: naming the key that is wrong.
    :raises TypeError: for a value of the wrong type.
    """
    if not isinstance(document, Mapping):
        raise TypeError(f"a policy file holds a table (a JSON object), got {type(document).__name__}")
    unknown = sorted(set(document) - set(_TOP_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; a policy file holds {', '.join(_TOP_KEYS)}")
    version = document.get("format")
    if version != POLICY_FILE_FORMAT:
        raise ValueError(
            f"format must be {POLICY_FILE_FORMAT} (the policy file format this version reads), got {version!r}"
        )
    base_name = document.get("base", "v3")
    if base_name not in POLICIES:
        raise ValueError(f"base must be one of {', '.join(POLICIES)}, got {base_name!r}")
    options = document.get("options", {})
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a table, got {type(options).__name__}")
    unknown = sorted(set(options) - set(OPTION_FIELDS))
    if unknown:
        raise ValueError(f"options: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(OPTION_FIELDS)}")
    hosts = document.get("host", [])
    if isinstance(hosts, Mapping) or not isinstance(hosts, list):
        raise TypeError(f"host must be an array of tables ([[host]]), got {type(hosts).__name__}")
    rules: List[HostRule] = []
    for index, table in enumerate(hosts):
        if not isinstance(table, Mapping):
            raise TypeError(f"host {index + 1} must be a table, got {type(table).__name__}")
        unknown = sorted(set(table) - set(_RULE_FIELDS))
        if unknown:
            raise ValueError(
                f"host {index + 1}: unknown field(s) {', '.join(unknown)}; a rule holds {', '.join(_RULE_FIELDS)}"
            )
        if "match" not in table:
            raise ValueError(f"host {index + 1} has no match (the host it applies to)")
        rules.append(HostRule(**table))
    base = POLICIES[base_name]
    values = {f.name: getattr(base, f.name) for f in fields(CanonicalPolicy)}
    values.update(options)
    values["host_rules"] = rules
    return CanonicalPolicy(**values)


def load_policy_file(path: Union[str, os.PathLike[str]]) -> CanonicalPolicy:
    """The policy of a policy file: TOML, or JSON when its name ends in ``.json``.

    :raises TypeError: for a path that is not a ``str`` or path-like object.
    :raises PolicyFileError: (a ``ValueError``) naming the file and the problem.
    """
    where = os.fspath(path)
    try:
        data = Path(where).read_bytes()
    except OSError as exc:
        raise PolicyFileError(f"{where}: cannot read the policy file: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
        document = json.loads(text) if where.lower().endswith(".json") else tomllib.loads(text)
        return read_policy(document)
    except UnicodeDecodeError:
        raise PolicyFileError(f"{where}: a policy file is UTF-8 text") from None
    except (ValueError, TypeError) as exc:  # json and tomllib errors are ValueErrors
        raise PolicyFileError(f"{where}: {exc}") from None


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (frozenset, set, list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in sorted(value)) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def policy_file_text(
    base: str, options: Mapping[str, object], rules: Iterable[HostRule], comments: Optional[Mapping[str, str]] = None
) -> str:
    """A policy file (TOML) for ``base`` with ``options`` and ``rules``; ``comments`` by rule
    pattern are written above each rule. :func:`load_policy_file` reads it back."""
    lines = [f"format = {POLICY_FILE_FORMAT}", f"base = {_toml_value(base)}"]
    if options:
        lines += ["", "[options]"] + [f"{name} = {_toml_value(value)}" for name, value in sorted(options.items())]
    for rule in rules:
        lines.append("")
        note = (comments or {}).get(rule.match)
        if note:
            lines += [f"# {line}" for line in note.splitlines()]
        lines.append("[[host]]")
        lines += [f"{name} = {_toml_value(value)}" for name, value in rule.document().items()]
    return "\n".join(lines) + "\n"
