"""A trajectory link's first screen, drawn by the server (app/first_screen.py, app/serve.py).

The HTML is checked for escaping and content; the middleware runs in front of Streamlit's own
static handler serving Streamlit's own index page (a real Starlette app, over HTTP in process);
who may see it is checked against a real SQLite store with real password sessions."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import streamlit
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.testclient import TestClient
from streamlit.web.server.starlette.starlette_static_routes import (
    create_streamlit_static_handler,
)

from faillab.app.first_screen import (
    FIRST_SCREEN_ID,
    FIRST_SCREEN_STEPS,
    caller_may_view,
    first_screen_html,
    session_token,
)
from faillab.app.serve import FirstScreenMiddleware, inject_first_screen
from faillab_core.settings import AuthMode, Settings
from labeling.store import open_store
from trajectories.model import Run, Step, StepKind, Task, Trajectory

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _trajectory(n_steps: int = 3, question: str = "How many patients had sepsis?") -> Trajectory:
    steps = []
    for i in range(n_steps):
        if i % 2 == 0:
            steps.append(Step(kind=StepKind.SQL, code=f"SELECT {i} FROM admissions",
                              observation=f"[({i},)]"))
        else:
            steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=f"thought {i}"))
    return Trajectory(task=Task(id="t1", question=question, reference_sql="SELECT 1",
                                ground_truth=[[1]]),
                      run=Run(name="run-a", model="model-a"), steps=steps, final_answer=[[2]])


def test_the_first_screen_holds_the_question_the_steps_and_the_answer() -> None:
    html = first_screen_html(_trajectory())
    assert f'id="{FIRST_SCREEN_ID}"' in html
    assert "How many patients had sepsis?" in html
    assert "SELECT 0 FROM admissions" in html and "SELECT 2 FROM admissions" in html
    assert "thought 1" in html
    assert "Final answer vs ground truth" in html  # the page's own answer panel
    assert "Loading the interactive page" in html


def test_every_string_from_the_log_is_escaped() -> None:
    traj = _trajectory(question=HOSTILE)
    traj.steps.append(Step(kind=StepKind.SQL, code=HOSTILE, observation=HOSTILE))
    traj.steps.append(Step(kind=StepKind.MESSAGE, role=HOSTILE, content=HOSTILE))
    traj.run = Run(name=HOSTILE, model=HOSTILE)
    html = first_screen_html(traj)
    assert "<img" not in html
    assert 'alert("x")</script>' not in html
    assert html.count("<script>") == 1  # the removal script, which carries no log data
    assert "&lt;script&gt;" in html


def test_a_long_trajectory_draws_its_first_steps_and_says_how_many_follow() -> None:
    html = first_screen_html(_trajectory(FIRST_SCREEN_STEPS + 7))
    assert f"SELECT {FIRST_SCREEN_STEPS - 2} FROM" in html
    assert f"SELECT {FIRST_SCREEN_STEPS} FROM" not in html
    assert "7 more steps on the page" in html


def test_thinking_is_folded_as_on_the_page() -> None:
    traj = _trajectory(1)
    traj.steps.append(Step(kind=StepKind.THINKING, content="secret plan " * 100))
    html = first_screen_html(traj)
    assert "secret plan" not in html
    assert "1. Thinking (1,200 characters" in html


def test_who_may_see_it_follows_the_sign_in_gate(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'labels.sqlite'}")
    store.users.add("ada", "annotator", password="a long enough password")
    token = store.sessions.create("ada", timedelta(hours=1))
    local = Settings.from_env({"FAILLAB_AUTH": "none"})
    password = Settings.from_env({"FAILLAB_AUTH": "password"})
    sso = Settings.from_env({"FAILLAB_AUTH": "oidc"})
    assert local.auth == AuthMode.NONE and caller_may_view(local, None)
    assert not caller_may_view(password, None)
    assert not caller_may_view(password, store.sessions.user("not a token"))
    assert caller_may_view(password, store.sessions.user(session_token(
        {"faillab_session": token})))
    store.sessions.end(token)
    assert not caller_may_view(password, store.sessions.user(token))
    assert not caller_may_view(sso, object())


# -- the middleware in front of Streamlit's own page ----------------------------------------
def _client(draw: Any) -> TestClient:
    static = os.path.join(os.path.dirname(streamlit.__file__), "static")
    app = Starlette(routes=[Mount("/", app=create_streamlit_static_handler(static, None))],
                    middleware=[Middleware(FirstScreenMiddleware, draw=draw)])
    return TestClient(app)


def test_the_trajectory_page_is_sent_with_its_first_screen() -> None:
    calls: list[tuple[str, dict[str, str]]] = []

    def draw(trajectory_id: str, cookies: dict[str, str]) -> str:
        calls.append((trajectory_id, cookies))
        return f'<div id="{FIRST_SCREEN_ID}">drawn {trajectory_id}</div>'

    client = _client(draw)
    plain = client.get("/browse")
    page = client.get("/trajectory?id=abc", cookies={"faillab_session": "tok%20en"})
    assert page.status_code == 200
    assert calls == [("abc", {"faillab_session": "tok%20en"})]
    body = page.text
    assert f'<div id="{FIRST_SCREEN_ID}">drawn abc</div>' in body
    assert body.index("<body") < body.index(FIRST_SCREEN_ID) < body.index('id="root"')
    assert int(page.headers["content-length"]) == len(page.content)
    assert page.headers["cache-control"] == "no-store"
    assert "etag" not in page.headers
    # Streamlit's page is otherwise the same: its scripts are all still there.
    assert body.replace(f'<div id="{FIRST_SCREEN_ID}">drawn abc</div>', "") == plain.text
    # A browser holding a cached copy still gets the first screen, not a 304.
    again = client.get("/trajectory?id=abc", headers={"if-none-match": plain.headers["etag"]})
    assert again.status_code == 200 and "drawn abc" in again.text


def test_without_a_first_screen_the_page_is_streamlits_own() -> None:
    def refuse(trajectory_id: str, cookies: dict[str, str]) -> None:
        return None

    def fail(trajectory_id: str, cookies: dict[str, str]) -> str:
        raise RuntimeError("the workspace is being rebuilt")

    plain = _client(refuse).get("/browse").text
    assert _client(refuse).get("/trajectory?id=abc").text == plain
    assert _client(fail).get("/trajectory?id=abc").text == plain  # never worse than without
    no_id = _client(lambda *_: pytest.fail("drawn without an id")).get("/trajectory")
    assert no_id.text == plain
    other = _client(lambda *_: pytest.fail("drawn for another page")).get("/annotate?id=abc")
    assert other.text == plain


def test_a_malformed_cookie_header_is_nobody() -> None:
    seen: list[dict[str, str]] = []

    def draw(trajectory_id: str, cookies: dict[str, str]) -> None:
        seen.append(cookies)

    _client(draw).get("/trajectory?id=abc", headers={"cookie": '"\x7f;;=;"bad'})
    assert seen and "faillab_session" not in seen[0]


def test_a_page_without_a_body_tag_is_left_alone() -> None:
    assert inject_first_screen(b"<html>no body</html>", "<div></div>") is None
    assert inject_first_screen(b"<html><body class='x'><p>", "<i></i>") == (
        b"<html><body class='x'><i></i><p>")


def test_a_prose_answer_is_text_in_the_pages_font_not_a_code_box() -> None:
    traj = _trajectory()
    traj.final_answer = "**Answer**\n\nThere were <em>three</em> patients.\n\n* one\n* two"
    html = first_screen_html(traj)
    assert '<div class="faillab-prose">**Answer**' in html
    assert "&lt;em&gt;three&lt;/em&gt;" in html and "<em>" not in html
