"""The Ask CROW web page: static HTML, CSS and ES modules from `dashboard/`, served at `/`."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "dashboard"

# The page runs only its own scripts and styles: no inline script, no other origin, no
# plugins. Rendering escapes all model output; this is the second line of defense.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def dashboard() -> FileResponse:
    """The Ask CROW page (sessions, org and chat state live in the URL and the browser)."""
    return FileResponse(
        DASHBOARD_DIR / "index.html",
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )


class _Static(StaticFiles):
    """Static files revalidated on every load, so a changed module is never stale."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.setdefault("Cache-Control", "no-cache")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response


def install(app: FastAPI) -> None:
    """The page at `/` and its assets under `/static/`."""
    app.include_router(router)
    app.mount("/static", _Static(directory=DASHBOARD_DIR / "static"), name="dashboard-static")
