"""``python -m faillab.app.serve run main.py ...``: Streamlit's own command line, started with
the endpoints the workbench must not serve taken away. ``faillab serve`` runs this.

Streamlit answers ``/_stcore/metrics`` to anyone who can reach the server, before any sign-in
(the workbench's sign-in is a page, and that endpoint is no page): it counts sessions and their
memory, which tells a stranger who is at work and when. Nothing here reads it, so the route
answers 404 for everyone; Streamlit offers no setting for it, hence the replacement of the
function that builds the route, before the server starts.

A trajectory link's page is sent with its first screen already in it (``app/first_screen.py``):
one middleware, innermost (after Streamlit's path security, session and compression), adds it
to the HTML Streamlit serves for ``/trajectory?id=...``. Every other request passes untouched.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

__all__ = ["FirstScreenMiddleware", "add_first_screen", "close_metrics", "inject_first_screen",
           "main"]

_LOG = logging.getLogger(__name__)


def close_metrics() -> None:
    """Make Streamlit's metrics route answer 404. Raises ``RuntimeError`` when this Streamlit
    no longer builds the route where it is replaced: a server must not start with the endpoint
    open because an upgrade moved it."""
    from starlette.responses import PlainTextResponse
    from starlette.routing import BaseRoute, Route
    from streamlit.web.server.starlette import starlette_app, starlette_routes

    if not hasattr(starlette_routes, "create_metrics_routes") or not hasattr(
            starlette_routes, "ROUTE_METRICS"):
        raise RuntimeError("this Streamlit version builds its metrics endpoint elsewhere; "
                           "update faillab/app/serve.py before serving")

    def closed(runtime: Any, base_url: str | None) -> list[BaseRoute]:
        path = starlette_routes._with_base(starlette_routes.ROUTE_METRICS, base_url)

        async def not_served(_request: Any) -> PlainTextResponse:
            return PlainTextResponse("Not Found", status_code=404)

        return [Route(path, not_served, methods=["GET", "OPTIONS", "POST", "HEAD"])]

    starlette_routes.create_metrics_routes = closed
    # starlette_app imports the builder by name; replace that reference too.
    if hasattr(starlette_app, "create_metrics_routes"):
        starlette_app.create_metrics_routes = closed


#: Draws a first screen: (trajectory id, the request's cookies) -> HTML, or None for none.
Drawer = Callable[[str, Mapping[str, str]], "str | None"]
#: Reads for first screens, off the event loop; two at a time is what two cores can draw.
_FIRST_SCREEN_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="faillab-first-screen")


def inject_first_screen(page: bytes, first_screen: str) -> bytes | None:
    """``page`` (Streamlit's index HTML) with ``first_screen`` as the body's first child, or
    None when the page has no body tag to put it in."""
    opening = page.find(b"<body")
    close = page.find(b">", opening) if opening >= 0 else -1
    if close < 0:
        return None
    return page[:close + 1] + first_screen.encode("utf-8") + page[close + 1:]


class FirstScreenMiddleware:
    """Adds a trajectory's first screen to the page of a ``/trajectory?id=`` request (see the
    module's docstring). A failure to draw it leaves the ordinary page: never worse than
    without it."""

    def __init__(self, app: Any, base_url: str = "", draw: Drawer | None = None) -> None:
        self.app = app
        self.path = "/" + "/".join(p for p in (base_url.strip("/"), "trajectory") if p)
        if draw is None:
            from faillab.app.first_screen import first_screen_for

            draw = first_screen_for
        self.draw: Drawer = draw

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (scope.get("type") != "http" or scope.get("method") != "GET"
                or scope.get("path", "") != self.path):
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        trajectory_id = (query.get("id") or [""])[0]
        cookies = SimpleCookie()
        for name, value in scope.get("headers") or []:
            if name == b"cookie":
                try:
                    cookies.load(value.decode("latin-1"))
                except Exception:  # a malformed cookie header: the caller is nobody
                    cookies = SimpleCookie()
        jar = {k: m.value for k, m in cookies.items()}
        first_screen = None
        if trajectory_id:
            try:
                first_screen = await asyncio.get_running_loop().run_in_executor(
                    _FIRST_SCREEN_POOL, self.draw, trajectory_id, jar)
            except Exception:
                _LOG.exception("first screen of %r not drawn", trajectory_id)
        if not first_screen:
            await self.app(scope, receive, send)
            return
        # The whole page, in one body: no conditional answer (a 304 would keep a cached page
        # without the first screen) and no file sent by the server outside this middleware.
        inner = {**scope,
                 "headers": [(k, v) for k, v in scope.get("headers") or []
                             if k not in (b"if-none-match", b"if-modified-since")],
                 "extensions": {k: v for k, v in (scope.get("extensions") or {}).items()
                                if k != "http.response.pathsend"}}
        await self.app(inner, receive, _Injecting(send, first_screen))


class _Injecting:
    """A ``send`` that holds the response until its body is whole, then adds the first screen
    when the response is the page (200, HTML, not compressed); anything else goes out as it
    came."""

    def __init__(self, send: Any, first_screen: str) -> None:
        self.send, self.first_screen = send, first_screen
        self.start: dict[str, Any] | None = None
        self.body: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            return
        if message["type"] != "http.response.body" or self.start is None:
            await self.send(message)
            return
        self.body.append(message.get("body", b""))
        if message.get("more_body"):
            return
        start, body = self.start, b"".join(self.body)
        headers = [(k.lower(), v) for k, v in start.get("headers", [])]
        is_page = (start.get("status") == 200
                   and any(k == b"content-type" and v.startswith(b"text/html")
                           for k, v in headers)
                   and not any(k == b"content-encoding" for k, v in headers))
        page = inject_first_screen(body, self.first_screen) if is_page else None
        if page is not None:
            body = page
            headers = [(k, v) for k, v in headers
                       if k not in (b"content-length", b"cache-control", b"etag",
                                    b"last-modified")]
            # The first screen is this caller's: no cache may keep it or give it to another.
            headers += [(b"content-length", str(len(body)).encode()),
                        (b"cache-control", b"no-store")]
            start = {**start, "headers": headers}
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body, "more_body": False})


def add_first_screen() -> None:
    """Add ``FirstScreenMiddleware`` innermost to Streamlit's middleware. Raises
    ``RuntimeError`` when this Streamlit builds its middleware elsewhere."""
    from starlette.middleware import Middleware
    from streamlit import config
    from streamlit.web.server.starlette import starlette_app

    build = getattr(starlette_app, "create_streamlit_middleware", None)
    if build is None:
        raise RuntimeError("this Streamlit version builds its middleware elsewhere; update "
                           "faillab/app/serve.py before serving")

    def with_first_screen() -> list[Middleware]:
        base_url = str(config.get_option("server.baseUrlPath") or "")
        return [*build(), Middleware(FirstScreenMiddleware, base_url=base_url)]

    starlette_app.create_streamlit_middleware = with_first_screen


def main() -> None:
    close_metrics()
    add_first_screen()
    from streamlit.web.cli import main as streamlit_main

    sys.argv = ["streamlit", *sys.argv[1:]]
    streamlit_main()


if __name__ == "__main__":
    main()
