"""The timeline page: ``/`` serves it, ``/static/`` its script and style, shipped in the package.

The page holds no data: it is the same HTML for everyone, and reads the thread list, a thread's
timeline and values through the API's own routes, which ask for the token. So the page itself
is served without one, and asks for it (kept in the browser tab's session storage) when the
API answers 401. Its ``<base>`` is where the app is mounted (the Agent Server example mounts it
under ``/session-state``), so every request it makes stays inside this app.
"""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
import html
from functools import cache
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

__all__ = ["ASSETS", "router"]

ASSETS = files(__package__) / "static"
"""The page's files: ``index.html``, ``page.js``, ``page.css`` (no build step)."""

router = APIRouter(tags=["page"])


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's policy: its own script, style and API calls, nothing else. A value shown on the
page is a tool's output, which anyone who can make a tool return text chose; should any of it
ever reach the page as markup, no script of theirs runs and nothing is sent elsewhere."""


@cache
def _template() -> str:
    """``index.html``, read once: it ships in the package and does not change while it runs."""
    return (ASSETS / "index.html").read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page(request: Request) -> HTMLResponse:
    base = html.escape(request.scope.get("root_path", "").rstrip("/") + "/", quote=True)
    text = _template().replace("{{BASE}}", base)
    return HTMLResponse(
        text,
        headers={"Cache-Control": "no-cache", "Content-Security-Policy": CONTENT_SECURITY_POLICY},
    )
