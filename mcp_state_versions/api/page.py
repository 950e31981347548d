"""The timeline page: ``/`` serves it, ``/static/`` its script and style, shipped in the package.

The page holds no data: it is the same HTML for everyone, and reads the thread list, a thread's
timeline and values through the API's own routes, which ask for the token. So the page itself
is served without one, and asks for it (kept in the browser tab's session storage) when the
API answers 401. Its ``<base>`` is where the app is mounted (the Agent Server example mounts it
under ``/session-state``), so every request it makes stays inside this app.

``/docs`` and ``/redoc`` are the API's reference: Swagger UI and ReDoc, whose files the
``fastapi-offline`` package ships, served by this app (a CDN would leave them blank offline
and tell another site who reads the docs). Each is a page like the timeline: the same HTML for
everyone, reading ``/openapi.json`` with the token the tab keeps, and asking for it where the
schema is behind one.
"""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
import html
from functools import cache
from importlib.resources import files
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

__all__ = ["ASSETS", "REFERENCE_ASSETS", "router"]

ASSETS = files(__package__) / "static"
"""The page's files: ``index.html``, ``page.js``, ``page.css``, and the reference's
``reference.html`` and ``docs.js`` (no build step)."""

REFERENCE_ASSETS = str(Path(fastapi_offline.__file__).parent / "static")
"""Swagger UI's and ReDoc's own files (``swagger-ui-bundle.js``, ``swagger-ui.css``,
``redoc.standalone.js``), as the ``fastapi-offline`` package ships them: served under
``/static/reference/``."""

router = APIRouter(tags=["page"])


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's policy: its own script, style and API calls, nothing else. A value shown on the
page is a tool's output, which anyone who can make a tool return text chose; should any of it
ever reach the page as markup, no script of theirs runs and nothing is sent elsewhere."""


DOCS_CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY.replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
).replace("default-src 'none'", "default-src 'none'; worker-src blob:")
"""The reference's policy: the timeline page's, with the inline styles Swagger UI and ReDoc
set on their own elements, and the workers ReDoc starts from a blob (they draw the schema,
never a tool's output)."""


@cache
def _template(name: str) -> str:
    """A page's HTML, read once: it ships in the package and does not change while it runs."""
    return (ASSETS / name).read_text(encoding="utf-8")


def _served(
    request: Request, name: str, policy: str, fields: dict[str, str] | None = None
) -> HTMLResponse:
    base = html.escape(request.scope.get("root_path", "").rstrip("/") + "/", quote=True)
    text = _template(name).replace("{{BASE}}", base)
    for field, value in (fields or {}).items():
        text = text.replace("{{" + field + "}}", value)
    return HTMLResponse(
        text, headers={"Cache-Control": "no-cache", "Content-Security-Policy": policy}
    )


_VIEWERS = {
    "swagger": {
        "VIEWER": "swagger",
        "STYLES": '<link rel="stylesheet" href="static/reference/swagger-ui.css">\n',
        "SCRIPT": "swagger-ui-bundle.js",
        "OTHER_ROUTE": "redoc",
        "OTHER_NAME": "ReDoc",
    },
    "redoc": {
        "VIEWER": "redoc",
        "STYLES": "",
        "SCRIPT": "redoc.standalone.js",
        "OTHER_ROUTE": "docs",
        "OTHER_NAME": "Swagger UI",
    },
}
"""What ``reference.html`` is filled with for each viewer of the schema."""


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page(request: Request) -> HTMLResponse:
    return _served(request, "index.html", CONTENT_SECURITY_POLICY)


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
async def docs(request: Request) -> HTMLResponse:
    return _served(request, "reference.html", DOCS_CONTENT_SECURITY_POLICY, _VIEWERS["swagger"])


@router.get("/redoc", response_class=HTMLResponse, include_in_schema=False)
async def redoc(request: Request) -> HTMLResponse:
    return _served(request, "reference.html", DOCS_CONTENT_SECURITY_POLICY, _VIEWERS["redoc"])
