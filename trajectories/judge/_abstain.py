"""Does an answer abstain? An explicit refusal ("I can't answer that"), a statement that the
data is not in the database ("MIMIC-IV has no address field", "this information is not
recorded", "none of the tables holds it"), or a request to clarify the question. Used both ways:
for a question whose right answer is to abstain, an abstention is correct; for an answerable
one, it is wrong.

Where a refusal counts: never inside a code sample (a fenced block or inline code: a comment in
a query is not what the answer says), and in a long answer (more than six paragraphs: a tutorial,
a report) only in its first two or last two paragraphs, where an answer says what it concludes;
a caveat in the middle of a substantive answer is not an abstention."""

from __future__ import annotations

import re

from trajectories.judge._values import plain

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
    r"|\bnot\s+something\s+(?:i|the\s+database)\s+can\b"
    # That no table or column holds what was asked, in the other words people use for it.
    r"|\bnone\s+of\s+the\s+(?:[\w-]+\s+){0,2}(?:tables?|columns?|fields?)\s+(?:[\w-]+\s+){0,3}"
    r"(?:contains?|holds?|has|have|records?|stores?|includes?|captures?|tracks?|provides?)"
    r"|\bno\s+(?:[\w-]+\s+){0,2}(?:tables?|columns?|fields?)\s+(?:[\w-]+\s+){0,3}(?:contains?|holds?|"
    r"records?|stores?|includes?|captures?|tracks?|provides?|exists?)\b"
    r"|\b(?:does|do)\s*(?:not|n't)\s+exist\s+(?:in|within)\s+(?:the|this|mimic)"
    r"|\b(?:is|are)\s*(?:not|n't)\s+(?:part\s+of|among|in)\s+(?:the|this)\s+"
    r"(?:[\w-]+\s+)?(?:schema|database|dataset)"
    r"|\b(?:not|never)\s+(?:recorded|captured|stored|tracked|documented)\s+anywhere\b"
    r"|\b(?:schema|database|dataset)\s+(?:has|contains|holds|includes)\s+no\b",
    re.I)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
#: An answer with more paragraphs than this is long: a refusal counts in its first two and last
#: two only.
_LONG_PARAGRAPHS = 6


def abstains(text: str) -> str | None:
    """The words by which ``text`` abstains, or None when it does not (the module's rules)."""
    # Code first: the plain form drops the backticks that mark it.
    said = plain(_CODE.sub(" ", text))
    paragraphs = [p for p in re.split(r"\n\s*\n", said) if p.strip()]
    if len(paragraphs) > _LONG_PARAGRAPHS:
        said = "\n\n".join(paragraphs[:2] + paragraphs[-2:])
    match = _ABSTAIN.search(said)
    return " ".join(match.group(0).split()) if match else None
