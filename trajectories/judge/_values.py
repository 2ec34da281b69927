"""Values as people write them in an answer: numbers (with thousands separators, signs, number
words and rounding), dates and times in the common written forms, yes and no, and the words of
a text. Each reader takes answer prose and returns what it states; the judge compares that
with the gold."""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

_DASHES = re.compile(r"[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]")
_MARKUP = re.compile(r"\*\*|__|`|\*")


def plain(text: str) -> str:
    """``text`` in Unicode compatibility form with plain dashes and quotes and without markdown
    emphasis (``**2,845 mL**`` is ``2,845 mL``); the text is otherwise kept."""
    value = unicodedata.normalize("NFKC", text)
    value = _DASHES.sub("-", value)
    value = re.sub(r"[\u2018\u2019\u201b]", "'", value)
    value = re.sub(r"[\u201c\u201d\u201f]", '"', value)
    return _MARKUP.sub("", value)


# ---------------------------------------------------------------------------- dates and times

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_MONTH = r"(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_TIME = (r"(?:\s*,?\s*(?:at\s+|@\s*)?(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?"
         r"(?:\.\d+)?(?:\s*(?P<ap>[ap])\.?\s?m\b\.?)?)?")
_DATE_FORMS = [
    re.compile(r"(?<!\d)(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?:T|\s+|(?=\s*,?\s*at\s))?"
               + _TIME, re.I),
    re.compile(r"\b" + _MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})" + _TIME,
               re.I),
    re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r",?\s+(?P<y>\d{4})"
               + _TIME, re.I),
    re.compile(r"(?<![\d/])(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})" + _TIME, re.I),
]


@dataclass(frozen=True)
class Moment:
    """A date, with the time of day when one is written (seconds when they are)."""

    year: int
    month: int
    day: int
    hour: int | None = None
    minute: int | None = None
    second: int | None = None

    def agrees_with(self, gold: Moment) -> bool:
        """Same day, and the same time wherever both state one (a date written without its
        time agrees with a gold time: "on October 1, 2100" for "2100-10-01 13:08:00")."""
        if (self.year, self.month, self.day) != (gold.year, gold.month, gold.day):
            return False
        if self.hour is None or gold.hour is None:
            return True
        if (self.hour, self.minute) != (gold.hour, gold.minute):
            return False
        return self.second is None or gold.second is None or self.second == gold.second

    def __str__(self) -> str:
        day = f"{self.year:04d}-{self.month:02d}-{self.day:02d}"
        if self.hour is None:
            return day
        seconds = f":{self.second:02d}" if self.second is not None else ""
        return f"{day} {self.hour:02d}:{self.minute:02d}{seconds}"


def _moment(match: re.Match[str]) -> Moment | None:
    parts = match.groupdict()
    month = _MONTHS.get((parts.get("mon") or "")[:3].lower()) if parts.get("mon") \
        else int(parts["m"])
    year, day = int(parts["y"]), int(parts["d"])
    if not month or not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    if parts.get("h") is None:
        return Moment(year, month, day)
    hour, minute = int(parts["h"]), int(parts["mi"])
    meridiem = (parts.get("ap") or "").lower()
    if meridiem == "p" and hour < 12:
        hour += 12
    elif meridiem == "a" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return Moment(year, month, day)
    second = int(parts["s"]) if parts.get("s") is not None else None
    return Moment(year, month, day, hour, minute, second)


def moments(text: str) -> tuple[list[Moment], str]:
    """The dates (and times) ``text`` states, and the text with them blanked out (so their
    digits are not read again as numbers)."""
    found: list[Moment] = []
    spans: list[tuple[int, int]] = []
    for form in _DATE_FORMS:
        for match in form.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in spans):
                continue
            moment = _moment(match)
            if moment is not None:
                found.append(moment)
                spans.append(match.span())
    rest = list(text)
    for a, b in spans:
        rest[a:b] = " " * (b - a)
    return found, "".join(rest)


def gold_moment(value: str) -> Moment | None:
    """A gold value that is a date or a date and time (``2100-12-24 14:02:00``)."""
    text = value.strip()
    match = _DATE_FORMS[0].fullmatch(text)
    return _moment(match) if match else None


# ------------------------------------------------------------------------------- numbers

_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
          "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
          "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
          "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
          "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
          "single": 1, "once": 1, "twice": 2, "none": 0}
_WORD_NUMBER = re.compile(
    r"\b(?P<tens>twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-(?P<unit>one|two|three"
    r"|four|five|six|seven|eight|nine)\b|\b(?P<word>" + "|".join(_WORDS) + r")\b", re.I)
#: "no patients", "no organisms": zero stated with a determiner.
_NO_COUNT = re.compile(r"\b(?:no|not\s+any)\s+(?!doubt|longer|more\s+than|later|earlier|"
                       r"further|other|one\s+else)[a-z]", re.I)
#: A number as written: an optional attached sign, thousands grouped by commas or by spaces
#: (``2,845``, ``2 000``), a decimal part. Not inside a word or an identifier (``icd9``).
_NUMBER = re.compile(
    r"(?<![\w.,])(?P<sign>[-+])?(?<![\w.])(?P<int>\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+(?![\d,.])"
    r"|\d+)(?P<frac>\.\d+)?(?![\w]|\.\d|,\d{3})")


@dataclass(frozen=True)
class Number:
    value: float
    decimals: int  # digits written after the point
    text: str


def numbers(text: str) -> list[Number]:
    """The numbers ``text`` states, digits and words (dates read out first: ``moments``)."""
    found: list[Number] = []
    for match in _NUMBER.finditer(text):
        whole = match["int"].replace(",", "").replace(" ", "")
        frac = match["frac"] or ""
        sign = -1.0 if match["sign"] == "-" else 1.0
        found.append(Number(sign * float(whole + frac), max(len(frac) - 1, 0), match.group(0)))
    for match in _WORD_NUMBER.finditer(text):
        if match["word"]:
            value = _WORDS[match["word"].lower()]
        else:
            value = _WORDS[match["tens"].lower()] + _WORDS[match["unit"].lower()]
        found.append(Number(float(value), 0, match.group(0)))
    for match in _NO_COUNT.finditer(text):
        found.append(Number(0.0, 0, match.group(0).strip()))
    return found


def round_half_up(value: float, decimals: int) -> float:
    if not math.isfinite(value):
        return value
    return float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals),
                                               rounding=ROUND_HALF_UP))


def _decimals_of(value: float) -> int:
    text = repr(float(value))
    if "e" in text or "." not in text:
        return 0
    return len(text.split(".")[1].rstrip("0"))


#: The relative tolerance of number comparisons (as exact match's).
REL_TOL = 1e-4


def number_agrees(stated: Number, gold: float, declared: int | None = None) -> bool:
    """A stated number is the gold when they are equal within ``REL_TOL``, or when the gold
    rounded to as many decimals as were written is what was written (``24.98`` for 24.983;
    at least two decimals unless the gold has fewer), or both agree at a declared rounding."""
    if declared is not None and round_half_up(stated.value, declared) == round_half_up(
            gold, declared):
        return True
    if math.isclose(stated.value, gold, rel_tol=REL_TOL, abs_tol=1e-9):
        return True
    needed = min(2, _decimals_of(gold))
    return needed > 0 and stated.decimals >= needed \
        and round_half_up(gold, stated.decimals) == stated.value


def number_near(stated: Number, gold: float) -> bool:
    """Within 1% but not equal: an answer a person should look at (rounding, units)."""
    return gold != 0 and abs(stated.value - gold) <= 0.01 * abs(gold)


def as_number(value: object) -> float | None:
    """A gold cell as a number, when it is one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond every float (10**400) is no number to judge
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        if re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?", text):
            return float(text)
    return None


# ------------------------------------------------------------------------------ yes and no

_AUXILIARIES = frozenset({"is", "was", "were", "are", "has", "have", "had", "did", "does", "do",
                          "can", "could", "will", "would", "should", "am"})
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)
_NEGATION = re.compile(r"\b(?:not|never|none|neither|nor|n't)\b|n't\b", re.I)


def asks_yes_or_no(question: str) -> bool:
    """A question that starts with an auxiliary verb ("Has patient ... had ...?")."""
    words = re.findall(r"[a-z']+", question.lower())
    while words and words[0] in ("so", "and", "then", "please", "tell", "me", "whether",
                                 "if", "check"):
        words = words[1:]
    return bool(words) and words[0] in _AUXILIARIES


def polarity(text: str) -> bool | None:
    """What an answer to a yes/no question says: its first yes or no, else a negation means
    no; None when it says neither."""
    first = _YES_NO.search(text)
    if first:
        return first.group(1).lower() == "yes"
    if _NEGATION.search(text):
        return False
    return None


# ------------------------------------------------------------------------------- words

_NOT_WORD = re.compile(r"[^a-z0-9%+#.]+")


def words(text: str) -> str:
    """Text as a run of lower-case words for containment tests (``med/surg`` is ``med surg``);
    a point is kept inside numbers (``0.9%``) only."""
    value = _NOT_WORD.sub(" ", plain(text).lower())
    value = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", value)
    return " ".join(value.split())


def contains_words(haystack: str, needle: str) -> bool:
    """Whether ``needle``'s words appear together, in order, in ``haystack`` (both ``words``)."""
    return bool(needle) and f" {needle} " in f" {haystack} "


#: Number words for a requested count of answers ("top five", "the three most common").
_COUNT_WORDS = {w: v for w, v in _WORDS.items() if 1 <= v <= 20 and w not in ("single", "once",
                                                                               "twice", "none")}
_TOP_K = re.compile(
    r"\b(?:top|first|last|the)\s+(?P<a>\d{1,2}|" + "|".join(_COUNT_WORDS) + r")\b"
    r"(?=(?:\s+\w+){0,3}?\s+(?:most|least|common|commonly|frequent|frequently|usual|popular|"
    r"prescribed|ordered|taken|diagnos))"
    r"|\b(?:most|least)\s+(?:\w+\s+){0,2}?(?P<b>\d{1,2}|" + "|".join(_COUNT_WORDS) + r")\b"
    r"|\b(?P<c>\d{1,2}|" + "|".join(_COUNT_WORDS) + r")\s+(?:most|least|commonly|frequently)\b",
    re.I)


def requested_count(question: str) -> int | None:
    """How many answers a "top k" question asks for ("top five", "the three most common",
    "the most frequent four"), or None."""
    match = _TOP_K.search(question)
    if not match:
        return None
    word = (match["a"] or match["b"] or match["c"]).lower()
    return int(word) if word.isdigit() else _COUNT_WORDS.get(word)
