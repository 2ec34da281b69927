"""A trajectory link's first screen, drawn by the server into the page it sends.

A link to one trajectory opened in a new browser waited for Streamlit's whole front end (about
4.6 MB of script, parsed and run) and a session before anything of the trajectory showed: 1.8 to
2.4 s here, more than twice a server-rendered annotation tool's item page. What a person reads
first (the question, the steps, the answer against the gold) needs no script, so the server now
places it in the HTML of ``/trajectory?id=...`` itself, read by the same functions the page
uses and as escaped as the page's own blocks. The browser paints it as soon as the HTML
arrives; when the page draws its own steps pane (interactive: keys, Re-run, verdicts), a few
lines of script remove the first screen. Until then a banner says the page is still loading.

Who may see it is decided as the page decides: the sign-in gate's rules, on the request's own
cookies (``caller_may_view``). Without a valid session nothing is drawn, and the browser gets
the ordinary page with its sign-in form. Nothing here writes: the first screen is a read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import unquote

from faillab.app.widgets.answer import answer_panel_parts
from faillab.app.widgets.safe import escape_html
from faillab.app.widgets.steps import (
    STEPS_CSS,
    action_html,
    collapsed_message,
    message_html,
    usage_text,
)
from faillab_core.settings import AuthMode, Settings
from trajectories.model import Step, StepKind, Trajectory

#: The element the server adds to the page; the page's script removes it by this id.
FIRST_SCREEN_ID = "faillab-first-screen"
#: Steps drawn in the first screen; the rest come with the interactive page a moment later.
FIRST_SCREEN_STEPS = 40
#: What the removal script waits for: the page's own steps; its verdict box, which the page draws
#: right after the steps pane (a trajectory with no steps, such as a results table's answer, has
#: nothing else to wait for); or anything the page says instead of a trajectory (an error, a
#: sign-in form) in the main area.
PAGE_READY_SELECTOR = (".st-key-steps_pane .faillab-step, .st-key-trajectory_verdict, "
                       '[data-testid="stMain"] [data-testid="stAlert"], '
                       '[data-testid="stMain"] [data-testid="stException"], '
                       '[data-testid="stMain"] [data-testid="stForm"]')
#: However the page ends up, the first screen never stays longer than this.
FIRST_SCREEN_MAX_MS = 30_000

_CSS = f"""<style>
#{FIRST_SCREEN_ID} {{ position: fixed; inset: 0; z-index: 1000000; overflow: auto;
  background: #fff; color: rgb(49, 51, 63); padding: 1.5rem 3rem;
  font-family: "Source Sans", "Source Sans Pro", sans-serif; font-size: 1rem; line-height: 1.5; }}
@media (min-width: 768px) {{ #{FIRST_SCREEN_ID} {{ padding: 1.5rem 5rem 1.5rem calc(300px + 5rem);
  background: linear-gradient(to right, rgb(240, 242, 246) 300px, #fff 300px); }} }}
#{FIRST_SCREEN_ID} .faillab-prose {{ white-space: pre-wrap; overflow-wrap: anywhere;
  max-height: 220px; overflow: auto; border: 1px solid rgba(128, 128, 128, 0.3);
  border-radius: 0.4rem; padding: 0.6rem 0.8rem; }}
#{FIRST_SCREEN_ID} .faillab-stacked {{ grid-template-columns: 1fr; }}
#{FIRST_SCREEN_ID} .faillab-first-columns {{ display: grid; grid-template-columns: 3fr 2fr;
  gap: 1.5rem; align-items: start; }}
#{FIRST_SCREEN_ID} .faillab-first-columns > div {{ min-width: 0; }}
#{FIRST_SCREEN_ID} .faillab-loading {{ position: sticky; top: 0; z-index: 1; }}
</style>"""

#: Removes the first screen once the page has drawn what replaces it (or at the latest after
#: FIRST_SCREEN_MAX_MS). It carries no data: only the two constants above. It looks every 40 ms
#: rather than on every change of the document: React's first render makes thousands of
#: changes, and the page's own drawing is what the person waits for.
_SCRIPT = ("<script>(function(){var o=document.getElementById('" + FIRST_SCREEN_ID + "');"
           "if(!o)return;var w;function done(){if(o.parentNode)o.parentNode.removeChild(o);"
           "clearInterval(w);}"
           "w=setInterval(function(){if(document.querySelector("
           + json.dumps(PAGE_READY_SELECTOR) + "))done();},40);"
           f"setTimeout(done,{FIRST_SCREEN_MAX_MS});}})();</script>")


def caller_may_view(settings: Settings, session_user: object | None = None) -> bool:
    """Whether the sign-in gate would show this caller the trajectory page.

    Local mode (``none``): anyone who reaches the server reads it, as the page allows a visitor
    who has not chosen a name. Password mode: only with a live session, which the caller
    checks in the store and passes as ``session_user`` (see ``session_token``). Single sign-on
    is Streamlit's own cookie, which only a script run can read: no first screen there."""
    if settings.auth == AuthMode.NONE:
        return True
    if settings.auth == AuthMode.PASSWORD:
        return session_user is not None
    return False


def session_token(cookies: Mapping[str, str]) -> str:
    """The password-mode session token the browser sends (written percent-encoded)."""
    from faillab.app.auth import SESSION_COOKIE

    return unquote(str(cookies.get(SESSION_COOKIE) or ""))


def _folded_step_html(index: int, step: Step) -> str:
    what = "Thinking" if step.kind == StepKind.THINKING else "System prompt"
    usage = usage_text(step)
    return (f'<div class="faillab-step"><div class="faillab-message-role">{index}. {what} '
            f"({len(step.content or ''):,} characters"
            f"{' · ' + escape_html(usage) if usage else ''}): opens on the page</div></div>")


def step_block_html(index: int, step: Step) -> str:
    """One step as the page's steps pane draws it, long parts left to the page's expanders."""
    if collapsed_message(step):
        return _folded_step_html(index, step)
    if step.kind == StepKind.MESSAGE:
        return message_html(index, step)
    block, more = action_html(index, step)
    if more:
        block = block[:-len("</div>")] + (
            '<p class="faillab-note">The rest of this output opens on the page.</p></div>')
    return block


def answer_html(traj: Trajectory) -> str:
    """The page's answer panel; a prose side (drawn as Markdown on the page, by a script) is
    its escaped text in the page's font until then, not a narrow code box."""
    head, pair, tail = answer_panel_parts(traj)
    sides = "".join(
        html if html is not None else
        (f'<div><p class="faillab-note">{escape_html(caption)}</p>'
         f'<div class="faillab-prose">{escape_html(value)}</div></div>')
        for caption, value, html in pair)
    # As on the page, a prose answer and the gold stand one under the other, each full width.
    stacked = " faillab-stacked" if any(html is None for _, _, html in pair) else ""
    return (f'<div class="faillab-answer">{head}<div class="faillab-pair{stacked}">{sides}'
            f"</div>{tail}</div>")


def first_screen_html(traj: Trajectory) -> str:
    """The trajectory's first screen as one block of escaped HTML (with its style and the
    script that removes it): the question, the first steps, the answer against the gold."""
    task, run = traj.task, traj.run
    shown = traj.steps[:FIRST_SCREEN_STEPS]
    steps = "".join(step_block_html(i, s) for i, s in enumerate(shown))
    if not traj.steps:
        steps = ('<p class="faillab-note">No steps: the producer recorded the final answer '
                 "only.</p>")
    rest = len(traj.steps) - len(shown)
    if rest > 0:
        steps += f'<p class="faillab-note">{rest:,} more steps on the page.</p>'
    meta = {"intent": task.intent, "scope": task.scope, "template": task.template_id,
            "split": task.split, "task": task.id}
    return (
        f'{STEPS_CSS}{_CSS}<div id="{FIRST_SCREEN_ID}" aria-busy="true">'
        '<div class="faillab-info faillab-loading" role="status">Loading the interactive page '
        "(keys, Re-run, verdicts)…</div>"
        f'<p class="faillab-note">Trajectory {escape_html(traj.id)} · run '
        f"{escape_html(run.name)} · model {escape_html(run.model)} · rollout "
        f"{escape_html(run.rollout)}</p>"
        '<h3 class="faillab-heading">Question</h3>'
        f'<p class="faillab-message-text">{escape_html(task.question)}</p>'
        '<p class="faillab-note">'
        + " · ".join(f"{k}: {escape_html(v)}" for k, v in meta.items() if v) + "</p>"
        '<div class="faillab-first-columns"><div>'
        f"<p><strong>Steps</strong> ({len(traj.steps)}; {traj.n_turns} agent turns)</p>"
        f'<div class="faillab-steps">{steps}</div></div>'
        f"<div>{answer_html(traj)}</div></div></div>{_SCRIPT}")


def first_screen_for(trajectory_id: str, cookies: Mapping[str, str]) -> str | None:
    """The first screen of ``/trajectory?id=trajectory_id`` for the caller whose cookies these
    are, or None (no such trajectory, no workspace, or a caller the gate would not let in).

    Runs on a server thread outside any script run; it reads through the page's own cached
    loaders, so the page's first run then finds the trajectory read."""
    from faillab.app.state import contextless_here, existing_store, get_settings, load_trajectory

    contextless_here()
    settings = get_settings()
    user = None
    if settings.auth == AuthMode.PASSWORD:
        token = session_token(cookies)
        store = existing_store() if token else None
        user = store.sessions.user(token) if store is not None else None
    if not caller_may_view(settings, user):
        return None
    traj = load_trajectory(trajectory_id)
    return first_screen_html(traj) if traj is not None else None
