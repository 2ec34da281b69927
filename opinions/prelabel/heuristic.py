"""The offline default pre-labeller: deterministic rules over trajectory signals.

It proposes a category so that reviewers start from a guess rather than a blank form; it does not
replace them. Confidence is meant to be honest: only unambiguous mechanical evidence (a NameError
on a name an earlier call defined, the same action repeated verbatim) scores high, and the
fallback, which is a guess, scores about 0.3.

Evidence first: with a reference SQL, the first-divergence finder (trajectories.evidence; executed
in the SQL sandbox when ``ehr_path`` is given) runs before the text rules. Evidence whose
calibrated confidence reaches ``EVIDENCE_MIN`` decides the category and step; the text rules
then only add detail or name a rival. Weaker evidence is used when no text rule fires; with no
evidence at all the label is the low-confidence fallback and says why (docs/evidence.md).

Priority order of the text rules (used to choose among signals of comparable strength, i.e. within
``PRIORITY_MARGIN`` of the strongest one), with the confidence each rule reports:

1. Variable Scope Error - NameError on a name an earlier execution defined 0.92 (0.95 when
   repeated); missing table/view/CTE an earlier call created 0.90; NameError on a stateful name
   (conn, df, cohort...) 0.75; on a module alias (pd, np) 0.60; on a never-defined name 0.45.
2. Stuck-in-Loop - >= 3 identical actions that fail, come back empty or never lead to an
   answer 0.85 (+0.07 without answer or at the turn budget, +0.03 for >= 6 repeats, max 0.95);
   >= 3 near-identical (token Jaccard >= 0.9), mostly unproductive 0.75; >= 4 variants of one
   query differing only in literals, mostly unproductive 0.60; repeats that produced results
   0.45-0.50; -0.10 when the agent left the loop and answered.
3. (Clean/Noise taxonomies only) False NULL 0.75, NULL not returned 0.70, Noise not detected
   0.60.
4. Answer Format Error - same values in another structure 0.85; every row right but required
   fields missing 0.80 / extra fields 0.70; prose containing every expected value 0.65 (0.50
   for one short value); most rows right apart from fields 0.40.
5. Medical-Code Lookup Error - dotted ICD literal 0.80 (0.85 with an empty result); looked-up
   identifiers unused 0.70; both ICD families found, one hardcoded 0.65; icd_version filter the
   question does not ask for 0.55; dictionary lookup then no code filter at all 0.50; empty
   final answer with an equality literal never seen in any output 0.45.
   With a reference SQL: final identifiers equal to the reference's silence every code rule;
   over the same tables, only one ICD family where the reference needs both 0.65, another
   dictionary entry 0.60, a subset of the reference's identifiers 0.55. The icd_version rule
   looks at the last version-filtered query only, and not at one covering both versions or
   restricting to the version the reference restricts to.
6. SQL Logic Error - right rows, wrong multiplicity 0.70; COUNT without DISTINCT over a JOIN
   when counting patients/admissions 0.60; final query fails and no answer 0.55; expected rows
   plus extra rows 0.50; reference needs DISTINCT, final query lacks it 0.50; expected rows
   inside wider extra rows 0.45; a strict subset of rows 0.40; temporal question without any
   time ordering/comparison 0.40; empty final answer otherwise 0.35.
   Against a reference SQL over the same tables and identifiers (SQL inside Python cells
   included): COUNT over rows where it counts DISTINCT 0.65; other GROUP BY keys 0.60; another
   time window (INTERVAL) 0.60; time ordering replaced by a non-time key 0.55; a join on
   subject_id alone where it links by hadm_id 0.50; a missing temporal condition 0.50; an extra
   one 0.45. COUNT over a JOIN is not flagged when the reference counts joined rows too.
7. Semantic Misunderstanding - final query reads other base tables (not dictionaries, not CTE
   names) than the reference needs 0.50; otherwise the fallback guess 0.30 (0.20 with no
   steps at all).

The strongest other category (>= 0.40) becomes ``secondary_category``; competing explanations
cost the primary 0.10 (a rival within 0.10) or 0.05 (any rival >= 0.50).

Scope and loops come first because they are mechanical and leave unambiguous traces, and because
the taxonomy says they dominate the errors they cause (a truncated cohort after NameErrors is a
scope error; a loop started by a misreading is a loop). Format comes before code and SQL checks
because when the values are right, the query was not the problem.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from faillab_core.versions import code_version, package_files
from opinions.prelabel.base import LabelResult
from taxonomy import keys
from taxonomy.model import Taxonomy, TaxonomyError, builtin_taxonomies, default_taxonomy
from trajectories import signals as sg
from trajectories.evidence import Evidence, Probe, find_divergence
from trajectories.evidence.noref import has_reference, unanswerable
from trajectories.model import Trajectory
from trajectories.sql import SandboxError

PRIORITY: tuple[str, ...] = (
    sg.VARIABLE_SCOPE,
    sg.STUCK_IN_LOOP,
    sg.FALSE_NULL,
    sg.NULL_NOT_RETURNED,
    sg.NOISE_NOT_DETECTED,
    sg.ANSWER_FORMAT,
    sg.CODE_LOOKUP,
    sg.SQL_LOGIC,
    sg.SEMANTIC,
)
CORE_KEYS: tuple[str, ...] = (
    sg.SEMANTIC,
    sg.CODE_LOOKUP,
    sg.SQL_LOGIC,
    sg.VARIABLE_SCOPE,
    sg.ANSWER_FORMAT,
    sg.STUCK_IN_LOOP,
)
NOISE_KEYS: tuple[str, ...] = (sg.FALSE_NULL, sg.NULL_NOT_RETURNED, sg.NOISE_NOT_DETECTED)

# A weaker signal still wins if it is this close to the strongest one and ranks higher.
PRIORITY_MARGIN = 0.15
FALLBACK_CONFIDENCE = 0.3
NO_STEPS_CONFIDENCE = 0.2
SECONDARY_MIN = 0.4
# Evidence at or above this calibrated confidence decides before any text rule; below it, the
# text rules decide and the evidence is only cited.
EVIDENCE_MIN = 0.6

# How the core categories land in taxonomies that pool them (by taxonomy name).
BUILTIN_KEY_MAPS: dict[str, dict[str, str]] = {
    keys.ROBUSTGYM: {
        sg.SEMANTIC: keys.RETRIEVAL_ERROR,
        sg.CODE_LOOKUP: keys.RETRIEVAL_ERROR,
        sg.SQL_LOGIC: keys.RETRIEVAL_ERROR,
        sg.VARIABLE_SCOPE: keys.RETRIEVAL_ERROR,
        sg.STUCK_IN_LOOP: keys.RETRIEVAL_ERROR,
        sg.ANSWER_FORMAT: keys.ANSWER_FORMAT_ERROR,
    },
}

_Detector = Callable[[list[sg.ActionView], Trajectory], list[sg.Signal]]


def rule_files() -> list[Path]:
    """The code the heuristic's labels follow from: the signals, the evidence finder (with its
    calibration table), this module and the step-reading rules they share."""
    import trajectories.evidence
    import trajectories.reading

    return package_files(sg.__file__, trajectories.evidence.__file__, trajectories.reading.__file__,
                         __file__)


def rules_version(files: list[Path] | None = None) -> str:
    """A version of the rules made from their code (``rule_files``): a changed rule is a new
    version, so ``prelabel`` never serves a cached label the rules no longer give."""
    return code_version("rules", files if files is not None else rule_files())


class HeuristicLabeller:
    """Rule-based labeller implementing the ``Labeller`` protocol."""

    name = "heuristic"
    version = "1"
    model = "heuristic"
    prompt_version = rules_version()

    def __init__(
        self, taxonomy: Taxonomy | None = None, key_map: Mapping[str, str] | None = None,
        *, ehr_path: Path | None = None,
    ) -> None:
        self.taxonomy = taxonomy or default_taxonomy()
        self._key_map = self._build_key_map(self.taxonomy, key_map)
        self._others: dict[str, HeuristicLabeller] = {}
        # The EHR database the evidence finder executes on; without one it compares structure
        # and the recorded observations only.
        self.ehr_path = ehr_path
        self._local = threading.local()

    @staticmethod
    def _build_key_map(taxonomy: Taxonomy, key_map: Mapping[str, str] | None) -> dict[str, str]:
        """Internal key -> taxonomy key. Core keys must all land somewhere (every rule needs a
        target); Clean/Noise keys are used only when the taxonomy has them."""
        known = set(taxonomy.keys)
        bad = sorted(f"{k}->{v}" for k, v in (key_map or {}).items() if v not in known)
        if bad:
            raise TaxonomyError(
                f"key_map targets not in taxonomy {taxonomy.name!r}: {', '.join(bad)}"
            )
        given = dict(BUILTIN_KEY_MAPS.get(taxonomy.name, {}))
        given.update(key_map or {})
        out: dict[str, str] = {}
        missing: list[str] = []
        for key in CORE_KEYS + NOISE_KEYS:
            target = given.get(key, key)
            if target in known:
                out[key] = target
            elif key in CORE_KEYS:
                missing.append(key)
        if missing:
            raise TaxonomyError(
                f"taxonomy {taxonomy.name!r} lacks categories the heuristic labeller needs: "
                f"{', '.join(missing)}; pass key_map={{internal_key: taxonomy_key}} to map them "
                f"onto its categories ({', '.join(taxonomy.keys)})"
            )
        return out

    def _for_version(self, taxonomy_version: str) -> HeuristicLabeller:
        """The labeller for the taxonomy named in ``taxonomy_version`` ("name@ver+hash").
        A different content hash of the same taxonomy is fine: rules depend on keys only."""
        wanted = taxonomy_version.split("@", 1)[0].strip() if taxonomy_version else ""
        if not wanted or wanted == self.taxonomy.name:
            return self
        if wanted not in self._others:
            builtin = builtin_taxonomies().get(wanted)
            if builtin is None:
                raise TaxonomyError(
                    f"heuristic labeller is set up for taxonomy {self.taxonomy.name!r}, "
                    f"not {wanted!r}; construct HeuristicLabeller(taxonomy=...) for it"
                )
            self._others[wanted] = HeuristicLabeller(builtin, ehr_path=self.ehr_path)
        return self._others[wanted]

    def label(self, trajectory: Trajectory, taxonomy_version: str) -> LabelResult:
        return self._for_version(taxonomy_version)._label(trajectory)

    def label_with_evidence(
        self, trajectory: Trajectory, taxonomy_version: str, evidence: Evidence | None
    ) -> LabelResult:
        """The label given evidence found earlier (e.g. stored beside a pre-label), without
        running the finder: the queue's ranking must not execute SQL inside a page run."""
        labeller = self._for_version(taxonomy_version)
        result = labeller._decide(trajectory, evidence)
        return result if evidence is None else dataclasses.replace(
            result, evidence=evidence.to_dict())

    def signals(
        self, trajectory: Trajectory, views: list[sg.ActionView] | None = None
    ) -> list[sg.Signal]:
        """Every signal found, already mapped onto this taxonomy's keys."""
        if views is None:
            views = sg.action_views(trajectory)
        question = trajectory.task.question if isinstance(trajectory.task.question, str) else ""
        ref = trajectory.task.reference_sql
        reference = ref if isinstance(ref, str) else None
        ans = sg.answers(trajectory)
        detectors: list[_Detector] = [
            lambda v, t: sg.detect_variable_scope(v),
            sg.detect_loop,
            lambda v, t: sg.detect_answer_format(t, ans),
            lambda v, t: sg.detect_code_lookup(v, question, reference),
            lambda v, t: sg.detect_sql_logic(v, t, ans),
            sg.detect_semantic,
        ]
        if any(k in self._key_map for k in NOISE_KEYS):
            detectors.insert(2, lambda v, t: sg.detect_noise_handling(v, t, ans))
        found: list[sg.Signal] = []
        for detect in detectors:
            for s in detect(views, trajectory):
                target = self._key_map.get(s.category)
                if target is not None:
                    found.append(sg.Signal(target, s.confidence, s.step, s.rationale))
        return found

    def evidence(self, trajectory: Trajectory) -> Evidence | None:
        """The first-divergence evidence: against the reference SQL, or (without one) where the
        agent committed to answering a question the database cannot answer; None for a
        trajectory with neither (the text rules read it)."""
        if not has_reference(trajectory) and not (
            unanswerable(trajectory) and sg.has_final_answer(trajectory.final_answer)
        ) and not trajectory.task.has_ground_truth:
            # Without a reference, the finder has something to go on only when the task has a
            # verified answer: each query's rows (executed, or as recorded) are held against
            # it, and a term searched for in vain is read against it.
            return None
        return find_divergence(trajectory, probe=self._probe())

    def _probe(self) -> Probe | None:
        """One sandbox session per thread, opened on first use and kept: opening a locked-down
        DuckDB connection costs more than most evidence queries. A database that cannot be
        opened leaves the finder structural (recorded observations only), never a failed label."""
        if self.ehr_path is None:
            return None
        local = self._local
        if not hasattr(local, "probe"):
            stack = contextlib.ExitStack()
            try:
                local.probe = stack.enter_context(Probe.open(self.ehr_path))
                local.stack = stack  # closed with the thread's state
            except SandboxError:
                local.probe = None
        probe: Probe | None = local.probe
        return probe

    def _evidence_signal(
        self, evidence: Evidence | None, minimum: float = EVIDENCE_MIN
    ) -> sg.Signal | None:
        """The evidence as a signal when its calibrated confidence reaches ``minimum``."""
        if evidence is None or evidence.category is None or evidence.confidence < minimum:
            return None
        target = self.evidence_category(evidence)
        if target is None:
            return None
        return sg.Signal(target, evidence.confidence, evidence.step, "evidence: " + evidence.reason)

    def evidence_category(self, evidence: Evidence | None) -> str | None:
        """The evidence's category as a key of this labeller's taxonomy (None: none)."""
        if evidence is None or evidence.category is None:
            return None
        if evidence.part == "no_data" and sg.NULL_NOT_RETURNED in self._key_map:
            # A taxonomy with a category for an answer where NULL was right names it exactly.
            return self._key_map[sg.NULL_NOT_RETURNED]
        return self._key_map.get(evidence.category)

    def _rank(self, category: str) -> int:
        for i, internal in enumerate(PRIORITY):
            if self._key_map.get(internal) == category:
                return i
        return len(PRIORITY)

    def _label(self, trajectory: Trajectory) -> LabelResult:
        evidence = self.evidence(trajectory)
        result = self._decide(trajectory, evidence)
        if evidence is None:
            return result
        return dataclasses.replace(result, evidence=evidence.to_dict())

    def _decide(self, trajectory: Trajectory, evidence: Evidence | None) -> LabelResult:
        """The label, whose step is the evidence's or says why it is not (one proposal)."""
        return one_step(self._decide_category(trajectory, evidence), evidence,
                        self.evidence_category(evidence))

    def _decide_category(self, trajectory: Trajectory, evidence: Evidence | None) -> LabelResult:
        views = sg.action_views(trajectory)
        found = self.signals(trajectory, views)
        decided = self._evidence_signal(evidence)
        if decided is not None:
            return self._from_evidence(decided, found)
        weak = self._evidence_signal(evidence, minimum=FALLBACK_CONFIDENCE)
        if not found and weak is not None:
            # No text rule fires: weaker evidence still beats the semantic guess.
            return self._from_evidence(weak, found)
        if not found:
            step = sg.fallback_step(views, trajectory)
            if step is None:
                conf = NO_STEPS_CONFIDENCE
                why = "no steps recorded and no rule applies; semantic misreading is a guess."
            else:
                conf = FALLBACK_CONFIDENCE
                why = (
                    f"step {step}: no mechanical error pattern found; the first substantive "
                    "action is assumed to misread the request (a guess)."
                )
                if evidence is not None:
                    why += f" No evidence decided ({_evidence_why(evidence)})."
            return self._result(self._key_map[sg.SEMANTIC], conf, step, why, None)

        # Best signal per category, then priority among the comparably strong ones.
        best: dict[str, sg.Signal] = {}
        for s in found:
            cur = best.get(s.category)
            if cur is None or s.confidence > cur.confidence:
                best[s.category] = s
        ordered = sorted(best.values(), key=lambda s: (self._rank(s.category), -s.confidence))
        top = max(s.confidence for s in ordered)
        primary = next(s for s in ordered if s.confidence >= top - PRIORITY_MARGIN)
        rivals = sorted(
            (s for s in ordered if s.category != primary.category),
            key=lambda s: (-s.confidence, self._rank(s.category)),
        )
        secondary = rivals[0] if rivals and rivals[0].confidence >= SECONDARY_MIN else None

        conf = primary.confidence
        strong_rivals = [s for s in rivals if s.confidence >= 0.5]
        if secondary is not None and secondary.confidence >= conf - 0.1:
            conf -= 0.1  # two near-equal explanations: the choice between them is uncertain
        elif strong_rivals:
            conf -= 0.05
        rationale = primary.rationale
        if secondary is not None:
            rationale += f" Also possible: {secondary.category} ({secondary.rationale})"
        return self._result(
            primary.category,
            conf,
            primary.step,
            rationale,
            secondary.category if secondary else None,
        )

    def _from_evidence(self, decided: sg.Signal, found: list[sg.Signal]) -> LabelResult:
        """Evidence first: the text rules only name a rival (secondary) and cost confidence."""
        rivals = sorted(
            (s for s in found if s.category != decided.category),
            key=lambda s: (-s.confidence, self._rank(s.category)),
        )
        secondary = rivals[0] if rivals and rivals[0].confidence >= SECONDARY_MIN else None
        conf = decided.confidence
        rationale = decided.rationale
        agreeing = [s for s in found if s.category == decided.category]
        if agreeing:  # a text rule names the same category: its detail helps the reviewer
            rationale += " Rules agree: " + max(agreeing, key=lambda s: s.confidence).rationale
        if secondary is not None:
            if secondary.confidence >= conf:
                conf -= 0.1  # a mechanical text rule at least as sure disagrees
            rationale += f" Also possible: {secondary.category} ({secondary.rationale})"
        return self._result(
            decided.category, conf, decided.step, rationale,
            secondary.category if secondary else None,
        )

    def _result(
        self, category: str, conf: float, step: int | None, rationale: str, secondary: str | None
    ) -> LabelResult:
        return LabelResult(
            category=category,
            confidence=round(max(0.05, min(0.99, conf)), 2),
            first_error_step=step,
            rationale=rationale,
            labeller=self.name,
            labeller_version=self.version,
            secondary_category=secondary,
        )


def one_step(result: LabelResult, evidence: Evidence | None, category: str | None) -> LabelResult:
    """The label's step is the evidence's step whenever the evidence decides a category: it is
    where the agent's actions first commit to what differs from the reference (or to answering
    what cannot be answered), while a text rule's step is only where its pattern shows. When
    the label reads another category there, its rationale says so."""
    if (evidence is None or evidence.category is None or evidence.step is None
            or result.first_error_step == evidence.step):
        return result  # no evidence decides, it names no step, or both name the same step
    if category == result.category:
        return dataclasses.replace(result, first_error_step=evidence.step)
    why = (f" Step {evidence.step} is the evidence's ({evidence.part}, which alone would say "
           f"{category} at {evidence.confidence:.2f}); the rules read it as {result.category}"
           + (f", whose pattern shows at step {result.first_error_step}."
              if result.first_error_step is not None else "."))
    return dataclasses.replace(result, first_error_step=evidence.step,
                               rationale=result.rationale + why)


def _evidence_why(evidence: Evidence) -> str:
    if evidence.category is None:
        return evidence.reason
    return (f"{evidence.reason}, confidence {evidence.confidence:.2f} below "
            f"{FALLBACK_CONFIDENCE:.2f}")
