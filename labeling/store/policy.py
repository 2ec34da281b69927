"""The one place the store decides who may see and do what, and which categories are valid.

Every part of the store holds the one `Gate` of its store: every read of labels asks
`Gate.scope` what the viewer may see; every write of a label, an adjudication or an import
checks its categories with `Gate.categories`; every action restricted to leads (the table
`LEAD_ACTIONS`) goes through `Gate.authorise`. Pages and commands never decide visibility or
permissions themselves.

Visibility, with blind mode on:
- an annotator sees their own human labels, the LLM pre-label unless it is hidden until they
  commit, and nothing else (no colleague's label, no adjudication);
- a lead or admin sees everything, except on items they are assigned to annotate and have
  not labelled yet: there they are an annotator like any other until they commit.
With blind mode off everyone sees everything. `OPERATOR` is whoever runs the command line on
the store they own (exports, statistics): it sees everything.

Automatic opinions (the LLM pre-label, and the category the evidence finder suggests for an
item or a cluster) follow one rule, whatever blind mode says: with the pre-label hidden until
commit, a viewer sees them only on items they have labelled (a lead or admin: also on items not
assigned to them, which they review rather than label). Blind mode is about colleagues' labels;
hiding the pre-label is about anchoring, so turning blind mode off must not show it (it once
did: an annotator's Trajectory page showed the hidden pre-label's category). The finder's
suggestion comes from the same signals as the offline pre-labeller and matched the hidden
pre-label on most items, so hiding one and not the other would hide nothing. A viewer the store
does not know yet (nobody signed in, a name not yet recorded, no store at all) has labelled
nothing and is an annotator.

Counts over everyone's work (each annotator's progress, the distribution of all pre-labels)
say something about other people's labels or about pre-labels a viewer may not see: in blind
mode they are for leads and admins only (``Scope.sees_team_counts``), and the distribution of
the pre-labels also waits while they are hidden until commit (``Scope.sees_all_llm``).

History (labels retracted by Undo, and the change log of labels) is shown only to the
label's author and to leads and admins (where they see everything), in blind mode or not:
an undone label is a draft its author took back, not a judgment for colleagues to read.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from labeling.store.errors import NotFoundError, PermissionDeniedError, StoreError
from labeling.store.models import AssignmentRow, LabelRow, TaxonomyVersionRow, UserRow
from labeling.store.records import LEAD_ROLES
from taxonomy.model import Taxonomy, TaxonomyError, UnknownCategoryError, builtin_taxonomies


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Taxonomy]:
    return {tax.version: tax for tax in builtin_taxonomies().values()}


@dataclass(frozen=True)
class Viewer:
    """Who is reading. `name` None is the operator (the command line), who sees everything.

    The role is never taken from the caller: the store looks it up by name.
    """

    name: str | None
    blind: bool = True  # the workspace's blind-mode setting
    hide_prelabel: bool = False


OPERATOR = Viewer(None, blind=False)


@dataclass(frozen=True)
class Scope:
    """What one viewer may see, resolved once per read."""

    sees_all: bool
    user_id: int | None = None
    # A lead or admin (or the operator): may read other people's history where it sees all.
    lead: bool = False
    # Items a lead is assigned to and has not labelled: blind there, like an annotator.
    blind_items: frozenset[str] = field(default_factory=frozenset)
    # With the pre-label hidden until commit: the items the viewer committed on, where LLM
    # opinions show whatever else holds.
    hide_llm_everywhere_but: frozenset[str] | None = None
    # With the pre-label hidden until commit, for a lead: the items where it stays hidden (those
    # assigned to them and not labelled yet); everywhere else it shows. None: not a lead, so it
    # shows only on the items above.
    llm_hidden_items: frozenset[str] | None = None

    def _all_on(self, trajectory_id: str) -> bool:
        return self.sees_all and trajectory_id not in self.blind_items

    def may_see_human(self, trajectory_id: str, annotator_id: int | None) -> bool:
        if self._all_on(trajectory_id):
            return True
        return annotator_id is not None and annotator_id == self.user_id

    @property
    def sees_team_counts(self) -> bool:
        """Counts over everyone's work (each annotator's progress): leads and admins, and
        everyone with blind mode off."""
        return self.sees_all

    @property
    def sees_all_llm(self) -> bool:
        """Counts over every item's automatic opinion (the distribution of the pre-labels):
        as ``sees_team_counts``, and for someone who hides the pre-label until commit only
        when they are a lead (who reviews rather than labels)."""
        return self.sees_all and (self.hide_llm_everywhere_but is None
                                  or self.llm_hidden_items is not None)

    def may_see_adjudication(self, trajectory_id: str) -> bool:
        return self._all_on(trajectory_id)

    def may_see_history(self, trajectory_id: str, annotator_id: int | None) -> bool:
        """A retracted label (or a label's change log): its author, and leads where they see
        everything."""
        if annotator_id is not None and annotator_id == self.user_id:
            return True
        return self.lead and self._all_on(trajectory_id)

    def may_see_llm(self, trajectory_id: str) -> bool:
        """Any automatic opinion on the item: the pre-label and the evidence finder's
        suggestion. Blind mode plays no part (see the module docstring)."""
        if self.hide_llm_everywhere_but is None or trajectory_id in self.hide_llm_everywhere_but:
            return True
        return self.llm_hidden_items is not None and trajectory_id not in self.llm_hidden_items


def _user(session: Session, name: str) -> UserRow:
    row = session.scalars(select(UserRow).where(UserRow.name == name.strip())).first()
    if row is None:
        raise NotFoundError(f"unknown user {name!r}")
    return row


def as_viewer(viewer: Viewer | str | None, blind: bool | None = None) -> Viewer:
    """A `Viewer` from the older (name, blind) pair some callers still pass."""
    if isinstance(viewer, Viewer):
        return viewer
    return Viewer(viewer, blind=True if blind is None else blind)


def scope_for(session: Session, viewer: Viewer) -> Scope:
    """Resolve `viewer` against the store (its role, assignments and own labels).

    A nameless viewer is the operator when not blind, and sees no human label when blind
    (nobody signed in).
    """
    if viewer.name is None:
        return unknown_viewer_scope(viewer)
    found = session.scalars(select(UserRow).where(UserRow.name == viewer.name.strip())).first()
    if found is None:
        return unknown_viewer_scope(viewer)
    row = found
    lead = row.role in LEAD_ROLES
    if not viewer.blind and not viewer.hide_prelabel:
        return Scope(sees_all=True, user_id=row.id, lead=lead)
    # The items they labelled, read only where the scope depends on them (a read on every
    # scope was a sixth of an Annotate key's statements).
    committed = frozenset(
        session.scalars(
            select(LabelRow.trajectory_id).where(
                LabelRow.annotator_id == row.id,
                LabelRow.source == "human",
                LabelRow.retracted_at.is_(None),
            )
        )
    ) if lead or viewer.hide_prelabel else frozenset()
    llm_only_on = committed if viewer.hide_prelabel else None
    if not lead:
        return Scope(sees_all=not viewer.blind, user_id=row.id,
                     hide_llm_everywhere_but=llm_only_on)
    assigned = frozenset(
        session.scalars(select(AssignmentRow.trajectory_id).where(AssignmentRow.user_id == row.id))
    )
    labelling = assigned - committed
    return Scope(
        sees_all=True,
        user_id=row.id,
        lead=True,
        blind_items=labelling if viewer.blind else frozenset(),
        hide_llm_everywhere_but=llm_only_on,
        llm_hidden_items=labelling if viewer.hide_prelabel else None,
    )


def unknown_viewer_scope(viewer: Viewer) -> Scope:
    """The scope of a viewer who has recorded nothing: nobody signed in (the operator when not
    blind), a name the store does not hold yet, or any viewer where no store exists yet."""
    hidden = frozenset[str]() if viewer.hide_prelabel else None
    if not viewer.blind:
        return Scope(sees_all=True, lead=viewer.name is None, hide_llm_everywhere_but=hidden)
    return Scope(sees_all=False, hide_llm_everywhere_but=hidden)


def require_lead(session: Session, name: str, action: str) -> UserRow:
    """The user row of `name`, or PermissionDeniedError unless they are a lead or admin."""
    row = _user(session, name)
    if row.role not in LEAD_ROLES:
        raise PermissionDeniedError(f"{name} is an {row.role}; only leads and admins {action}")
    return row


# -- categories ---------------------------------------------------------------------------------


def taxonomy_for(session: Session, version: str) -> Taxonomy:
    """The taxonomy a version string names: a snapshot kept in the store, else a shipped one."""
    row = session.get(TaxonomyVersionRow, version)
    if row is not None:
        try:
            return Taxonomy.from_dict(row.snapshot)
        except TaxonomyError as exc:
            raise StoreError(f"taxonomy version {version!r} is stored but invalid: {exc}") from None
    if version in _shipped():
        return _shipped()[version]
    raise StoreError(
        f"unknown taxonomy version {version!r}; save it in the store first "
        "(store.taxonomies.save) or use a shipped one"
    )


def check_category(
    taxonomy: Taxonomy, value: str | None, *, what: str = "category", names_ok: bool = False
) -> str | None:
    """`value` as a category key of `taxonomy`, or StoreError naming the problem.

    Only keys are stored. `names_ok` (file imports) also accepts display names and maps them
    to their keys; everywhere else a display name is refused so the code path stays strict.
    """
    if value is None:
        return None
    if value in taxonomy.keys:
        return value
    if names_ok:
        try:
            return taxonomy.category(value).key
        except UnknownCategoryError:
            pass
    raise StoreError(
        f"unknown {what} {value!r} for taxonomy {taxonomy.version}; "
        f"expected one of: {', '.join(taxonomy.keys)}"
    )


# -- the gate -------------------------------------------------------------------------------------

Action = Literal[
    "adjudicate", "adjudicate_audit_item", "assign_others", "start_prelabel_run", "archive_audit"
]
# Actions only leads and admins may take, and how a refusal names them. The command line
# (actor None) is the operator of its own store and may take them all.
LEAD_ACTIONS: dict[str, str] = {
    "adjudicate": "adjudicate",
    "adjudicate_audit_item": "adjudicate audit items",
    "assign_others": "assign work to other people",
    "start_prelabel_run": "start pre-label runs",
    "archive_audit": "archive audits",
}


class Gate:
    """Validates and authorises every write, and scopes every read, for one store."""

    def __init__(self, read: Callable[[], AbstractContextManager[Session]]) -> None:
        self._read = read
        self._taxonomies: dict[str, Taxonomy] = {}  # versions are immutable once stored

    # -- reads --------------------------------------------------------------------------------

    @staticmethod
    def scope(session: Session, viewer: Viewer | str | None, blind: bool | None = None) -> Scope:
        return scope_for(session, as_viewer(viewer, blind))

    @staticmethod
    def sees_all_judgments(session: Session, user: str) -> bool:
        """Blind audit review: annotators see only their own judgments; leads and admins all."""
        return _user(session, user).role in LEAD_ROLES

    # -- permissions --------------------------------------------------------------------------

    @staticmethod
    def authorise(session: Session, actor: str | None, action: Action) -> UserRow | None:
        """The acting user's row, or PermissionDeniedError; None for the operator."""
        if actor is None:
            return None
        return require_lead(session, actor, LEAD_ACTIONS[action])

    @staticmethod
    def lead(session: Session, name: str, action: Action) -> UserRow:
        """Like `authorise` for actions that always name their lead (the decision records
        who took it)."""
        return require_lead(session, name, LEAD_ACTIONS[action])

    @staticmethod
    def authorise_many_items(session: Session, actor: str, trajectory_ids: list[str],
                             what: str) -> None:
        """One decision for many items (a cluster's): a lead's or an admin's, or an annotator's
        when every item is assigned to them, as an item's label is theirs to give. Refused
        (PermissionDeniedError) otherwise, naming how many items are not theirs."""
        row = _user(session, actor)
        if row.role in LEAD_ROLES:
            return
        assigned = set(session.scalars(
            select(AssignmentRow.trajectory_id).where(AssignmentRow.user_id == row.id)))
        missing = [t for t in trajectory_ids if t not in assigned]
        if missing:
            raise PermissionDeniedError(
                f"{what} is a lead's: {len(missing)} of the {len(trajectory_ids)} items are not "
                f"assigned to {actor!r}; nothing was labelled (label them one by one on "
                "Annotate, or ask a lead)")

    def authorise_assignment(
        self, session: Session, actor: str | None, people: list[str]
    ) -> None:
        """Anyone may take work for themselves; giving work to others is a lead's action."""
        if actor is not None and people != [actor]:
            self.authorise(session, actor, "assign_others")

    # -- categories ---------------------------------------------------------------------------

    def taxonomy(self, version: str) -> Taxonomy:
        if version not in self._taxonomies:
            with self._read() as s:
                self._taxonomies[version] = taxonomy_for(s, version)
        return self._taxonomies[version]

    def categories(
        self, version: str, category: str, secondary: str | None = None, *, names_ok: bool = False
    ) -> tuple[str, str | None]:
        """Primary and secondary category as keys of `version` (see `check_category`)."""
        if not category:
            raise StoreError("a label needs a category")
        tax = self.taxonomy(version)
        primary = check_category(tax, category, names_ok=names_ok)
        assert primary is not None
        secondary = check_category(tax, secondary, what="secondary category", names_ok=names_ok)
        return primary, secondary
