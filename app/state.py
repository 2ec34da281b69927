"""Process-wide resources (cached once per server) and per-session helpers shared by pages."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from faillab.settings import Settings
from labeling.store import Store, open_store
from trajectories.workspace import Workspace


def get_settings() -> Settings:
    # Not cached: reading a dozen environment variables is cheap, and a cached copy would
    # outlive a change of workspace in the same process (tests, bench scripts).
    return Settings.from_env()


@st.cache_resource
def get_workspace(root: str | None = None) -> Workspace:
    # One Workspace per process; it keeps a DuckDB connection per thread internally.
    return Workspace(Path(root) if root else get_settings().workspace)


@st.cache_resource
def get_store_for(url: str) -> Store:
    # One engine per process and URL; Store opens a short session per call (thread-safe).
    return open_store(url)


def get_store() -> Store:
    settings = get_settings()
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    return get_store_for(settings.annotations_url())


def workspace() -> Workspace:
    return get_workspace(str(get_settings().workspace))


def open_trajectory_link(trajectory_id: str) -> None:
    """Go to the trajectory page with a shareable deep link (?id=...)."""
    st.switch_page("views/trajectory.py", query_params={"id": trajectory_id})
