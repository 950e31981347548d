"""Thread ids and keys in a URL path, whatever they hold.

A thread id is any text its host chose (``user/42``, ``..``), and a key is ``/``-separated
parts any of which a tool named. In a URL path two things go wrong with them:

* **An encoded ``/``.** A client writes a ``/`` inside an id as ``%2F``; the server decodes
  the path before routing, and ``threads/user%2F42/state`` is routed as ``threads/user/42/
  state``, which names no route. :class:`EncodedSlashes` routes on the path as sent: a ``%2F``
  stays inside its segment.
* **A segment of dots.** Browsers and HTTP clients resolve ``.`` and ``..`` segments (encoded
  ``%2E`` too) before sending, so ``threads/../state`` arrives as ``state``. A client writes
  such a segment behind a ``~`` (``threads/~../state``), and :class:`PathRoute` takes one
  ``~`` off a segment of ``~`` and dots (``~~..`` is the id ``~..``). Only such segments
  change; every other id is written as it is.
"""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
import re
from typing import Any
from urllib.parse import unquote

from fastapi.routing import APIRoute

__all__ = ["EncodedSlashes", "PathRoute", "path_value"]

_SLASH = "\ue000"
"""Stands for a ``/`` that was sent encoded, between routing and the route's parameters (a
character of Unicode's private use area, which no id is expected to hold)."""

_ESCAPED_DOTS = re.compile(r"~+\.{1,2}")


def path_value(text: str) -> str:
    """A path parameter as the id or key it names (see the module docstring)."""
    parts = text.replace(_SLASH, "/").split("/") if "/" in text or _SLASH in text else [text]
    return "/".join(part[1:] if _ESCAPED_DOTS.fullmatch(part) else part for part in parts)


class PathRoute(APIRoute):
    """A route whose string path parameters are read with :func:`path_value`."""

    def matches(self, scope: Any) -> Any:
        match, child = super().matches(scope)
        params = child.get("path_params")
        if params:
            child["path_params"] = {
                name: path_value(value) if isinstance(value, str) else value
                for name, value in params.items()
            }
        return match, child


class EncodedSlashes:
    """ASGI middleware: route on the path as the client sent it, a ``%2F`` kept inside its
    segment (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower():
            sent = raw.split(b"?", 1)[0].decode("latin-1")
            parts = [unquote(part).replace("/", _SLASH) for part in sent.split("/")]
            scope = {**scope, "path": "/".join(parts)}
        await self.app(scope, receive, send)
