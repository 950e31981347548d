"""Credentials are never stored: the names they go by, matched as a person reads them, and a
value with them left out.

A tool's output is stored for good, in every checkpoint that holds it and in any copy of the
database. :func:`withheld` leaves out every field whose name looks like a credential, at any
depth, inside models and dataclasses too; :mod:`~mcp_state_versions.agent.publish` and capture leave
them out of what they publish, and capture refuses a tool's own ``Command`` that writes one into
``tool_state`` before any of the step's writes are stored (:func:`secret_paths`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from anyascii import anyascii
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = ["SECRET_NAMES", "secret_name_text", "secret_paths", "withheld"]

_SCALARS = frozenset({str, int, float, bool, type(None)})

SECRET_NAMES = (
    r"passw|passphrase|pwd|secret|token|bearer|jwt|apikey|accesskey|privatekey|privkey|"
    r"sshpriv|signingkey|encryptionkey|(?:openai|anthropic|aws|azure|gcp|google|github|gitlab|"
    r"stripe|slack|hf|huggingface)key|authorization|cookie|credential|sessionid"
)
"""Field names that are never stored: matched (as a regular expression, by search) against a
field's name as :func:`secret_name_text` writes it (Unicode folded to plain ASCII letters,
lowercased, everything but letters and digits removed), so ``api_key``, ``API-Key``,
``API~KEY``, ``apiKey``, a fullwidth ``ＡＰＩ＿ＫＥＹ``, one with a Cyrillic ``а`` or a zero-width
space inside are one name. A tool's output is stored for good, in every checkpoint that holds it
and in any copy of the database; a credential must not be among it."""

_NOT_LETTERS = re.compile(r"[^a-z0-9]")


def secret_name_text(name: str) -> str:
    """A field name as secret names are matched against it.

    Names are matched as a person reads them, not as they are encoded: compatibility forms
    (fullwidth letters, ligatures) are folded by NFKC, lookalike letters of other scripts (a
    Cyrillic ``а`` for a Latin ``a``) and accents are transliterated to ASCII by ``anyascii``,
    and every separator, punctuation mark and invisible character is dropped.
    """
    return _NOT_LETTERS.sub("", anyascii(unicodedata.normalize("NFKC", name)).lower())


class _SecretNames(dict[Any, bool]):
    """One secret-name pattern, as the field names already matched against it: ``self[name]``
    is whether field ``name`` is secret (a name that is not text never is).

    A tool publishes the same field names call after call, and matching each again was a
    third of a publish of 500 fields; a name seen before is one dict lookup (its hash is cached
    on the string), and only a new one is matched (``__missing__``). Past :attr:`MEMO` names
    it starts over."""

    MEMO = 4096

    def __init__(self, secret_names: str) -> None:
        super().__init__()
        self.pattern = re.compile(secret_names, re.IGNORECASE)

    def __missing__(self, name: Any) -> bool:
        if len(self) >= self.MEMO:
            self.clear()
        text = isinstance(name, str)
        found = self[name] = text and bool(self.pattern.search(secret_name_text(name)))
        return found


@functools.lru_cache(maxsize=16)
def _secret_names(secret_names: str) -> _SecretNames:
    return _SecretNames(secret_names)


def _at(path: str, name: Any) -> str:
    return f"{path}.{name}" if path else str(name)


def withheld(
    fields: Mapping[str, Any], secret_names: str | None = SECRET_NAMES
) -> tuple[dict[str, Any], list[str]]:
    """``fields`` without the secret-named fields at any depth, and the paths of those left
    out (``password``, ``config.api_key``, ``users[0].token``). ``secret_names=None`` keeps
    every field."""
    if not secret_names:
        return dict(fields), []
    gone: list[str] = []
    return _kept(fields, "", _secret_names(secret_names), gone), gone


def _kept(value: Any, path: str, secret: _SecretNames, gone: list[str]) -> Any:
    """``value`` without its secret-named fields, whose paths are added to ``gone``."""
    if type(value) in _SCALARS:  # most fields: nothing inside to look at
        return value
    if isinstance(value, Mapping):
        out = {}
        for name, inner in value.items():
            if not secret[name]:
                out[name] = (
                    inner
                    if type(inner) in _SCALARS
                    else _kept(inner, _at(path, name), secret, gone)
                )
            else:
                gone.append(_at(path, name))
        return out
    if isinstance(value, list | tuple):
        return [_kept(inner, f"{path}[{i}]", secret, gone) for i, inner in enumerate(value)]
    if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
        # a model's fields are fields too: looked at as the JSON they are stored as
        return _kept(to_jsonable_python(value), path, secret, gone)
    return value


def secret_paths(value: Any, path: str, secret_names: str = SECRET_NAMES) -> list[str]:
    """The paths of the secret-named fields in ``value`` (whose own name is ``path``'s last
    part), itself included: ``[]`` when it holds none."""
    secret = _secret_names(secret_names)
    name = path.rsplit("/", 1)[-1]
    if secret[name]:
        return [path]
    gone: list[str] = []
    if type(value) not in _SCALARS:
        _kept(value, path, secret, gone)
    return gone
