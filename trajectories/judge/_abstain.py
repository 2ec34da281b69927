"""Does an answer abstain? An explicit refusal ("I can't answer that"), a statement that the
data is not in the database ("MIMIC-IV has no address field", "this information is not
recorded"), or a request to clarify the question. Used both ways: for a question whose right
answer is to abstain, an abstention is correct; for an answerable one, it is wrong."""

from __future__ import annotations

import re

_ABSTAIN = re.compile(
    r"\b(?:i\s+)?(?:cannot|can\s*not|can't|could\s*not|couldn't|am\s+unable\s+to|unable\s+to"
    r"|not\s+(?:able|possible)\s+to|impossible\s+to)\s+(?:be\s+)?(?:answer|determine|provide|"
    r"find|identify|calculate|compute|retrieve|locate|tell|say|know|give|report|answered|"
    r"determined|found|identified|calculated|computed|retrieved)"
    r"|\bno\s+(?:way|means)\s+to\s+(?:answer|determine|tell|know)"
    r"|\b(?:does|do|did)\s*(?:not|n't)\s+(?:contain|have|include|store|record|capture|track|"
    r"hold|provide|exist|appear)"
    r"|\b(?:is|are|was|were)\s*(?:not|n't)\s+(?:available|recorded|stored|captured|tracked|"
    r"included|present|documented|contained|found)\s+(?:in|within)\s+(?:the|this|these|"
    r"mimic|our)"
    r"|\b(?:not|n't)\s+(?:available|recorded|stored|captured|tracked|included|present)\s+in\s+"
    r"(?:the|this)\s+(?:database|dataset|data|schema|tables?|records?)"
    r"|\bthere\s+(?:is|are)\s+no\s+(?:such\s+)?(?:column|field|table|information|data|record|"
    r"attribute|variable)s?\s+(?:for|about|on|that|which|to|in|containing|storing|with)"
    r"|\b(?:no|not\s+any)\s+(?:column|field|table|attribute|variable)s?\s+(?:for|about|that|"
    r"which|containing|storing|named|called)"
    r"|\b(?:insufficient|not\s+enough)\s+(?:information|data)"
    r"|\boutside\s+(?:the\s+)?scope\b|\bbeyond\s+(?:the\s+)?(?:scope|capabilit)"
    r"|\b(?:unanswerable|cannot\s+be\s+answered|can't\s+be\s+answered)\b"
    r"|\bi\s+(?:do\s*not|don't)\s+have\s+(?:access|information|the\s+(?:data|information))"
    r"|\bcould\s+you\s+(?:please\s+)?(?:clarify|specify|provide\s+more)"
    r"|\b(?:please|kindly)\s+(?:clarify|specify)\b"
    r"|\bno\s+(?:data|information|records?)\s+(?:is|are|was|were)\s+available\b"
    r"|\bno\s+such\s+(?:information|data|field|column|table|attribute|record)"
    r"|\b(?:information|data|details?)\s+(?:is|are|was|were)\s*(?:not|n't)\s+(?:available|"
    r"recorded|stored|captured|tracked|documented|present|included)"
    r"|\b(?:can't|cannot|can\s+not|unable\s+to)\s+(?:help|assist)\s+with"
    r"|\bnot\s+something\s+(?:i|the\s+database)\s+can\b",
    re.I)


def abstains(text: str) -> str | None:
    """The words by which ``text`` abstains, or None when it does not."""
    match = _ABSTAIN.search(text)
    return " ".join(match.group(0).split()) if match else None
