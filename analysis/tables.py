"""The statistics registry: one entry per table, read by the CLI, the Statistics page and the
exports alike.

Each ``Statistic`` names its table, its title and description, what it reads (the trajectory
frame, the final labels or the LLM-vs-human pairs), whether the label policy applies (which
final labels count), the options that change it (runs, Pass^k layout, SR(T) definition), its
compute function and its chart. ``compute`` is the one way to a table: it applies the label
policy and the options, so a number cannot differ between the command line and the page.
Tables that need labels return an empty frame (with the right columns) when there are none.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
import plotly.graph_objects as go

from analysis.charts import (
    failure_bars,
    labeller_bars,
    passk_lines,
    provenance_pie,
    robustness_bars,
    success_heatmap,
    turn_budget_lines,
    turns_bars,
    turns_per_category_bars,
)
from analysis.corrected import (
    CORRECTED_COLUMNS,
    corrected_bars,
    corrected_distribution,
    with_machine_category,
)
from analysis.failures import (
    DISTRIBUTION_COLUMNS,
    PROVENANCE_COLUMNS,
    TURNS_CATEGORY_COLUMNS,
    failure_distribution,
    provenance_share,
    turns_per_category,
)
from analysis.labeller import LABELLER_COLUMNS, labeller_agreement
from analysis.passk import pass_k, pass_k_paper
from analysis.reliability import reliability, reliability_bars
from analysis.robustness import robustness
from analysis.success import success_grid
from analysis.turns import SR_DEFINITIONS, success_by_turn_budget, turns_table
from labeling.store.records import HUMAN_PROVENANCES

Runs = Iterable[str] | None
TableFn = Callable[[pd.DataFrame, pd.DataFrame | None, Runs], pd.DataFrame]
Reads = Literal["trajectories", "final_labels", "label_pairs", "labels_and_pairs"]

#: Which final labels the label tables count: "human-confirmed" (adjudicated, or given by
#: annotators, agreed or single), the default everywhere; "all" adds LLM-only pre-labels nobody
#: has reviewed. The provenance table always counts every label, so the share left out stays
#: visible.
LABEL_POLICIES = ("human-confirmed", "all")
DEFAULT_LABEL_POLICY = LABEL_POLICIES[0]
PASSK_LAYOUTS = ("long", "paper")


@dataclass(frozen=True)
class TableOptions:
    """Everything a reader may choose about a table; each statistic says which ones it reads."""

    runs: tuple[str, ...] | None = None
    label_policy: str = DEFAULT_LABEL_POLICY
    passk_layout: str = PASSK_LAYOUTS[0]
    sr_definition: str = SR_DEFINITIONS[0]

    def __post_init__(self) -> None:
        for value, allowed, what in ((self.label_policy, LABEL_POLICIES, "label policy"),
                                     (self.passk_layout, PASSK_LAYOUTS, "Pass^k layout"),
                                     (self.sr_definition, SR_DEFINITIONS, "SR(T) definition")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r} (choose from {', '.join(allowed)})")

    @property
    def run_list(self) -> list[str] | None:
        return list(self.runs) if self.runs is not None else None


def counted_labels(labels: pd.DataFrame | None, policy: str = DEFAULT_LABEL_POLICY
                   ) -> pd.DataFrame | None:
    """The final labels the label tables count under ``policy`` (see ``LABEL_POLICIES``)."""
    if policy not in LABEL_POLICIES:
        raise ValueError(f"unknown label policy {policy!r} (choose from "
                         f"{', '.join(LABEL_POLICIES)})")
    if labels is not None and policy == "human-confirmed":
        return labels[labels["provenance"].isin(HUMAN_PROVENANCES)]
    return labels


def _success(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return success_grid(df, runs)


def _passk(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return pass_k(df, runs)


def _turns(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return turns_table(df, runs)


def _turn_budget(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return success_by_turn_budget(df, runs=runs)


def _taxonomy(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty:
        return pd.DataFrame(columns=DISTRIBUTION_COLUMNS)
    return failure_distribution(df, labels, runs)


def _taxonomy_turns(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty:
        return pd.DataFrame(columns=TURNS_CATEGORY_COLUMNS)
    return turns_per_category(df, labels, runs)


def _provenance(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty or "provenance" not in labels.columns:
        return pd.DataFrame(columns=PROVENANCE_COLUMNS)
    if runs is not None:
        # Restrict to labels of the selected runs' trajectories, like the other tables.
        ids = df.loc[df["run"].isin(list(runs)), "id"].astype(str)
        labels = labels[labels["trajectory_id"].astype(str).isin(ids)]
    return provenance_share(labels)


def _taxonomy_corrected(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs
                        ) -> pd.DataFrame:
    """Expects every final label with the machine's category on checked items (``compute``
    adds it from the pairs)."""
    if labels is None or labels.empty:
        return pd.DataFrame(columns=CORRECTED_COLUMNS)
    return corrected_distribution(df, labels, runs)


def _robustness(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return robustness(df, runs)


def _reliability(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return reliability(df, runs)


def _labeller(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    """Expects ``labels`` to be the pairs frame (trajectory_id, llm_category, human_category)."""
    if labels is None or not {"llm_category", "human_category"} <= set(labels.columns):
        return pd.DataFrame(columns=LABELLER_COLUMNS)
    if runs is not None:
        ids = df.loc[df["run"].isin(list(runs)), "id"].astype(str)
        labels = labels[labels["trajectory_id"].astype(str).isin(ids)]
    return labeller_agreement(labels)


def _passk_table(df: pd.DataFrame, labels: pd.DataFrame | None, options: TableOptions
                 ) -> pd.DataFrame:
    if options.passk_layout == "paper":
        return pass_k_paper(df, options.run_list)
    return pass_k(df, options.run_list)


def _turn_budget_table(df: pd.DataFrame, labels: pd.DataFrame | None, options: TableOptions
                       ) -> pd.DataFrame:
    return success_by_turn_budget(df, runs=options.run_list, definition=options.sr_definition)


def _with_runs(fn: TableFn) -> Callable[[pd.DataFrame, pd.DataFrame | None, TableOptions],
                                        pd.DataFrame]:
    def compute(df: pd.DataFrame, labels: pd.DataFrame | None, options: TableOptions
                ) -> pd.DataFrame:
        return fn(df, labels, options.run_list)

    return compute


@dataclass(frozen=True)
class Statistic:
    """One table of the registry (see the module docstring)."""

    name: str
    title: str
    description: str
    reads: Reads
    compute: Callable[[pd.DataFrame, pd.DataFrame | None, TableOptions], pd.DataFrame]
    chart: Callable[[pd.DataFrame], go.Figure] | None
    #: The options besides ``runs`` (every table reads that one) that change this table.
    options: frozenset[str] = field(default_factory=frozenset)

    @property
    def counts_labels_by_policy(self) -> bool:
        """The label policy applies to the tables of final labels, except provenance, which
        counts every label so the share the policy leaves out is seen."""
        return self.reads == "final_labels" and self.name != "provenance"


_ENTRIES = (
    Statistic("success", "Success", "Success rate by intent x scope per run (EHR-Complex "
              "Table 3).", "trajectories", _with_runs(_success), success_heatmap),
    Statistic("passk", "Pass^k / Pass@k", "Pass^k (consistency) and Pass@k (coverage) per "
              "run, scope and intent.", "trajectories", _passk_table, passk_lines,
              frozenset({"passk_layout"})),
    Statistic("turns", "Turns", "Action turns per scope on the tasks every selected run "
              "solved.", "trajectories", _with_runs(_turns), turns_bars),
    Statistic("turn_budget", "Turn budget", "SR(T): share of the tasks every selected run "
              "solved that a run completed within T turns (EHR-Complex Fig. 5); "
              "'all_trajectories' variant optional.", "trajectories", _turn_budget_table,
              turn_budget_lines, frozenset({"sr_definition"})),
    Statistic("taxonomy", "Failure taxonomy", "Failure categories per model with 95% Wilson "
              "intervals (final labels).", "final_labels", _with_runs(_taxonomy),
              failure_bars, frozenset({"label_policy"})),
    Statistic("taxonomy_corrected", "Failure shares, all labels", "Failure categories per "
              "model over people's and the machine's labels, the machine's corrected by its "
              "confusion on the items people checked, with 95% bootstrap intervals and the "
              "machine-labelled share (every label counted; unknown where no item was "
              "checked).", "labels_and_pairs", _with_runs(_taxonomy_corrected),
              corrected_bars),
    Statistic("taxonomy_turns", "Turns per category", "Mean and median turns per failure "
              "category (final labels).", "final_labels", _with_runs(_taxonomy_turns),
              turns_per_category_bars, frozenset({"label_policy"})),
    Statistic("provenance", "Label provenance", "Where the final labels come from "
              "(adjudicated, human, LLM only).", "final_labels", _with_runs(_provenance),
              provenance_pie),
    Statistic("robustness", "Robustness", "Clean vs Noise success on paired tasks "
              "(EHR-RobustGym Table 2).", "trajectories", _with_runs(_robustness),
              robustness_bars),
    Statistic("reliability", "Reliability score", "RS(0), RS(5), RS(10), RS(N) per run "
              "(EHRSQL-2024's metric): +1 a right answer or abstention, 0 an abstention on a "
              "question with an answer, -c any other answer; undecided left out and counted.",
              "trajectories", _with_runs(_reliability), reliability_bars),
    Statistic("labeller", "Pre-labeller vs human", "LLM pre-labeller vs human labels: kappa, "
              "precision, recall, override rate.", "label_pairs", _with_runs(_labeller),
              labeller_bars),
)
#: Every table by name, in the order the CLI lists and the page shows them.
STATISTICS: Mapping[str, Statistic] = {s.name: s for s in _ENTRIES}
#: The registry's names (iterating it gives them in order); kept under its older name.
TABLES = STATISTICS
DESCRIPTIONS: dict[str, str] = {s.name: s.description for s in _ENTRIES}
TITLES: dict[str, str] = {s.name: s.title for s in _ENTRIES}
LABEL_TABLES = frozenset(s.name for s in _ENTRIES
                         if s.reads in ("final_labels", "labels_and_pairs"))
PAIR_TABLES = frozenset(s.name for s in _ENTRIES if s.reads == "label_pairs")


def compute(name: str, df: pd.DataFrame, labels: pd.DataFrame | None,
            pairs: pd.DataFrame | None, options: TableOptions | None = None) -> pd.DataFrame:
    """The table ``name`` over the trajectory frame ``df``, every final label ``labels`` and
    the pairs, under ``options`` (the label policy applied here, never by the caller)."""
    statistic = STATISTICS[name]
    options = options or TableOptions()
    source = pairs if statistic.reads == "label_pairs" else labels
    if statistic.reads == "labels_and_pairs":
        # Every final label (no policy: the machine's are corrected, not left out), with the
        # machine's category on the items people checked.
        source = with_machine_category(labels, pairs)
    if statistic.counts_labels_by_policy:
        source = counted_labels(source, options.label_policy)
    return statistic.compute(df, source, options)


def label_policy_line(options: TableOptions) -> str:
    """What every output of a label table says about which labels it counts."""
    if options.label_policy == "all":
        return ("labels counted: all final labels, LLM-only pre-labels included "
                "(provenance counts every label)")
    return ("labels counted: human-confirmed only (adjudicated, agreed or single annotator; "
            "--labels all adds LLM-only pre-labels; provenance counts every label)")


def all_tables(
    df: pd.DataFrame,
    labels: pd.DataFrame | None = None,
    runs: Runs = None,
    pairs: pd.DataFrame | None = None,
    timings: dict[str, float] | None = None,
    options: TableOptions | None = None,
) -> dict[str, pd.DataFrame]:
    """Every registered table under ``options`` (``runs`` given apart overrides its runs).

    Pass a dict as ``timings`` to receive seconds per table (used by the benchmark).
    """
    options = options or TableOptions()
    if runs is not None:
        options = dataclasses.replace(options, runs=tuple(runs))
    out: dict[str, pd.DataFrame] = {}
    for name in STATISTICS:
        start = time.perf_counter()
        out[name] = compute(name, df, labels, pairs, options)
        if timings is not None:
            timings[name] = time.perf_counter() - start
    return out
