"""``python -m faillab.app.serve run main.py ...``: Streamlit's own command line, started with
the endpoints the workbench must not serve taken away. ``faillab serve`` runs this.

Streamlit answers ``/_stcore/metrics`` to anyone who can reach the server, before any sign-in
(the workbench's sign-in is a page, and that endpoint is no page): it counts sessions and their
memory, which tells a stranger who is at work and when. Nothing here reads it, so the route
answers 404 for everyone; Streamlit offers no setting for it, hence the replacement of the
function that builds the route, before the server starts.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["close_metrics", "main"]


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


def main() -> None:
    close_metrics()
    from streamlit.web.cli import main as streamlit_main

    sys.argv = ["streamlit", *sys.argv[1:]]
    streamlit_main()


if __name__ == "__main__":
    main()
