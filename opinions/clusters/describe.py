"""What a cluster is about, in one line: how many items and tasks, and the words its members'
questions share. A title taken from one member's question read as if the whole cluster were
that one task, when its members came from many."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from opinions.clusters.build import ItemSummary

# Words every clinical question uses; naming them would describe no cluster.
_COMMON = frozenset({
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "did", "do", "does", "during", "each",
    "for", "from", "had", "has", "have", "how", "in", "is", "it", "its", "many", "me", "much",
    "of", "on", "or", "over", "patient", "patients", "per", "show", "since", "than", "that",
    "the", "their", "them", "there", "these", "they", "this", "those", "to", "up", "was", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "with", "within", "without", "you",
    "your", "first", "last", "total", "number", "count", "value", "values", "list", "all", "time",
    "times", "ever", "give", "get", "find", "tell",
})
_WORD = re.compile(r"[a-z][a-z\-]{2,}")


def shared_words(questions: Sequence[str], limit: int = 3) -> list[str]:
    """The words found in the most questions (each question counts a word once), most shared
    first and then alphabetically; words every clinical question uses are left out."""
    counts: Counter[str] = Counter()
    for question in questions:
        counts.update({w for w in _WORD.findall(question.lower()) if w not in _COMMON})
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [word for word, _ in ranked[:limit]]


def cluster_title(cluster_id: int, members: Sequence[str],
                  items: Mapping[str, ItemSummary]) -> str:
    """"Cluster 3 · 89 items from 12 tasks · shared words: age, admission, hospital"."""
    known = [items[m] for m in members if m in items]
    tasks = len({item.task_id for item in known})
    words = shared_words([item.question for item in known])
    title = (f"Cluster {cluster_id} · {len(members)} item{'s' if len(members) != 1 else ''} "
             f"from {tasks} task{'s' if tasks != 1 else ''}")
    return title + (f" · shared words: {', '.join(words)}" if words else "")
