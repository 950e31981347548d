"""How values look to a model: one-line shapes, flattened lines, paths, outlines, redaction.

A model reads state through text. These helpers decide that text, and they are built for a
reader with a limited context window that will act on what it sees:

* a *shape* (``list[4] of 9.9``) is enough to know what a key holds without reading it;
* a value too large to show whole comes back as an *outline* of paths and shapes, so the model
  can narrow with ``path=`` or ``pattern=`` instead of receiving a truncated blob it would take
  for the whole;
* ``data:`` URIs (images, files) are replaced by a short marker everywhere; their bytes are
  never useful to a model as text and can fill its context.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import re2

__all__ = [
    "PathError",
    "PatternError",
    "compile_pattern",
    "flatten",
    "grep",
    "outline",
    "redact",
    "resolve_path",
    "shape",
    "show",
]

MAX_SHOWN_CHARS = 4000
"""A value whose JSON is longer than this is shown as an outline instead."""
MAX_LINES = 200
"""At most this many lines in an outline or a pattern's matches."""

_DATA_URI = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?[^,]*,", re.IGNORECASE)


def _data_marker(text: str) -> str | None:
    match = _DATA_URI.match(text)
    if match is None:
        return None
    kind = match.group(1) or "data"
    return f"<{kind}, {len(text):,} chars, redacted>"


def redact(value: Any) -> Any:
    """Return ``value`` with every ``data:`` URI string replaced by a short marker."""
    if isinstance(value, str):
        return _data_marker(value) or value
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text of ``value`` for a model; anything not JSON is shown by its ``repr``."""
    return json.dumps(value, ensure_ascii=False, indent=indent, default=_not_json)


def _not_json(value: Any) -> str:
    return f"<{type(value).__name__}: {value!r:.60}>"


def shape(value: Any) -> str:
    """A one-line description of a value: ``list[4] of 9.9``, ``object{name, bbox}``, ..."""
    if isinstance(value, str):
        marker = _data_marker(value)
        if marker:
            return marker
        if len(value) <= 40:
            return dumps(value)
        return f'str[{len(value)}] {dumps(value[:37])[:-1]}…"'
    if value is None or isinstance(value, bool | int | float):
        return dumps(value)
    if isinstance(value, list):
        if not value:
            return "list[0]"
        return f"list[{len(value)}] of {_short(value[0])}"
    if isinstance(value, dict):
        keys = list(value)
        listed = ", ".join(str(k) for k in keys[:6])
        more = f", +{len(keys) - 6} more" if len(keys) > 6 else ""
        return f"object{{{listed}{more}}}"
    return f"<{type(value).__name__}, not JSON>"


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"list[{len(value)}]"
    if isinstance(value, dict):
        return f"object[{len(value)} keys]"
    return shape(value)


class PathError(LookupError):
    """A ``path`` that leads nowhere; the message says where it stopped and what is there."""


class PatternError(ValueError):
    """A ``pattern`` that cannot be searched with; the message says what to send instead."""


_PATH_TOKEN = re.compile(r"\[(-?\d+)\]|\.?([^.\[\]]+)")


def _split_path(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    position = 0
    text = path.strip().lstrip("/").replace("/", ".")
    while position < len(text):
        match = _PATH_TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PathError(
                f"cannot read path {path!r} at {text[position:]!r}; write it like "
                "'features[0].name' or 'features.0.name'"
            )
        index, name = match.groups()
        tokens.append(int(index) if index is not None else name)
        position = match.end()
    return tokens


def resolve_path(value: Any, path: str) -> Any:
    """Follow ``path`` (``a.b[0].c``, ``a.b.0.c`` or ``a/b/0/c``) into ``value``."""
    current = value
    walked = ""
    for token in _split_path(path):
        if isinstance(current, dict):
            name = str(token)
            if name not in current:
                keys = ", ".join(map(str, list(current)[:20])) or "no keys"
                raise PathError(f"{walked or 'the value'} has no key {name!r}; it has: {keys}")
            current = current[name]
            walked = f"{walked}.{name}" if walked else name
        elif isinstance(current, list):
            try:
                index = int(token)
            except ValueError:
                raise PathError(
                    f"{walked or 'the value'} is a list of {len(current)}; index it with a "
                    f"number, not {token!r}"
                ) from None
            if not -len(current) <= index < len(current):
                raise PathError(
                    f"{walked or 'the value'} is a list of {len(current)}; index {index} is "
                    "out of range"
                )
            current = current[index]
            walked = f"{walked}[{index}]"
        else:
            raise PathError(
                f"{walked or 'the value'} is {shape(current)}, which has no parts to follow "
                f"{token!r} into"
            )
    return current


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf of ``value`` (empty containers are leaves)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def _options(*, literal: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    options.never_capture = True
    options.literal = literal
    options.max_mem = 8 << 20  # bounds what a pattern may build, not what it may match
    return options


def compile_pattern(pattern: str) -> tuple[Any, bool]:
    """``pattern`` as a case-insensitive regex, or as literal text when it is not a valid one.

    Patterns come from a model, so they run on RE2 (``google-re2``), whose matching time is
    linear in the text: no pattern, ``(a+)+$`` included, can backtrack for minutes and hold
    up the process. RE2 has no backreferences or lookarounds; a pattern using them is read as
    plain text, like any other it cannot compile. A model writing ``bbox[0`` means the text;
    failing the call would only cost it a turn. The flag says which reading was used, so the
    answer can tell the model.
    """
    try:
        return re2.compile(pattern, _options(literal=False)), False
    except re2.error:
        pass
    try:
        return re2.compile(pattern, _options(literal=True)), True
    except re2.error as error:  # too large for RE2 even as text
        raise PatternError(
            f"the pattern ({len(pattern):,} characters) is too large to search with ({error}); "
            "use a shorter one"
        ) from None


def grep(value: Any, pattern: str) -> tuple[list[str], bool]:
    """Lines ``path = value`` of ``value`` matching ``pattern`` (case-insensitive).

    Returns the lines (at most :data:`MAX_LINES`) and whether the pattern was read as literal
    text because it was not a valid regular expression.
    """
    regex, literal = compile_pattern(pattern)
    lines = []
    for path, leaf in flatten(redact(value)):
        line = f"{path or '(value)'} = {dumps(leaf)}"
        if regex.search(line):
            lines.append(line)
            if len(lines) >= MAX_LINES:
                break
    return lines, literal


def outline(value: Any, prefix: str = "", depth: int = 0) -> Iterator[str]:
    """Yield ``path: shape`` lines describing the structure of ``value``, a few levels deep."""
    yield f"{prefix or '(value)'}: {shape(value)}"
    if depth >= 3:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from outline(item, f"{prefix}.{key}" if prefix else str(key), depth + 1)
    elif isinstance(value, list) and value:
        yield from outline(value[0], f"{prefix}[0]", depth + 1)


def show(value: Any) -> str:
    """The text a model gets for a value: its JSON, or an outline when that would be too long."""
    clean = redact(value)
    text = dumps(clean, indent=None)
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    lines = []
    for index, line in enumerate(outline(clean)):
        if index >= MAX_LINES:
            lines.append("…")
            break
        lines.append(line)
    return (
        f"(too large to show whole: {len(text):,} chars of JSON; its structure follows. "
        "Read a part with path=..., or search it with pattern=...)\n" + "\n".join(lines)
    )
