"""Audit adjudication by key: V valid, I invalid, A/B/... take a reviewer's judgment, 1-5 invalid
for that reason; the rule for the reason is said before anything is saved.

The store keeps a reason with every verdict. Which one, and when the lead must give it:

- valid: none asked for. The concern the dissenting reviewer raised is kept as the verdict's
  reason (the one the lead weighed and overruled); a task counts each reason once in the
  report, so this adds nothing to its reason counts. With no concern recorded, "other".
- invalid: a reason code is required. It is pre-chosen when the reviewers who said invalid
  gave exactly one; otherwise the lead picks one (1-5, or the box) and that saves.
- take a reviewer: that reviewer's verdict and reason; an invalid one without a reason asks
  for one as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faillab.app.widgets.keymap import INVALID, TAKE_REVIEWER, VALID
from labeling.audit import REASON_CODES, REASON_LABELS
from labeling.store.records import AuditJudgment

#: Keys that take a reviewer's judgment, in review order (the page shows at most this many).
TAKE_KEYS = TAKE_REVIEWER
VALID_KEY, INVALID_KEY = VALID, INVALID
FALLBACK_REASON = "other"


@dataclass(frozen=True)
class Outcome:
    """What a key decides: the verdict and its reason, or ``reason`` None when the lead must
    still choose one (then nothing is saved)."""

    valid: bool
    reason: str | None


def concern(reviews: Sequence[AuditJudgment]) -> str | None:
    """The one reason the invalid reviews give (None when they give none or several)."""
    codes = {r.reason for r in reviews if not r.valid and r.reason}
    return codes.pop() if len(codes) == 1 else None


def outcome(choice: str, reviews: Sequence[AuditJudgment], chosen: str | None) -> Outcome:
    """The verdict key ``choice`` (V, I or a take key) decides, with ``chosen`` the reason in
    the box (if any)."""
    if choice in TAKE_KEYS:
        review = reviews[TAKE_KEYS.index(choice)]
        if review.valid:
            return outcome(VALID_KEY, reviews, chosen)
        return Outcome(False, review.reason or chosen)
    if choice == VALID_KEY:
        return Outcome(True, chosen or concern(reviews) or FALLBACK_REASON)
    return Outcome(False, chosen or concern(reviews))


def verdict_text(valid: bool, reason: str | None) -> str:
    """"valid" or "invalid: <reason>"; a valid verdict names the concern it overruled."""
    label = REASON_LABELS.get(reason or "", reason or "no reason")
    return f"valid (concern weighed: {label})" if valid else f"invalid: {label}"


def rule_line(reviews: Sequence[AuditJudgment]) -> str:
    """The rule, said before saving: which keys need a reason and which reason each takes."""
    pre = concern(reviews)
    invalid = (f"I invalid, for the reviewers' reason ({REASON_LABELS.get(pre, pre)}) unless "
               "you choose another" if pre else
               "I invalid: needs a reason code (1-5 choose one and save)")
    takes = [f"{key} take {r.annotator}'s "
             + ("valid" if r.valid else f"invalid ({REASON_LABELS.get(r.reason, r.reason)})"
                if r.reason else "invalid (needs a reason code)")
             for key, r in zip(TAKE_KEYS, reviews, strict=False)]
    return " · ".join(["V valid: no reason needed", invalid, *takes,
                       "1-5 invalid for that reason"])


def reason_keys() -> list[tuple[str, str]]:
    return [(str(i), f"invalid: {REASON_LABELS[c]}") for i, c in enumerate(REASON_CODES, 1)]
