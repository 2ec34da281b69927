"""Statistics over the trajectory table and final labels, plus exports and chart builders.

Everything here is pure: DataFrames in, DataFrames (or plotly figures / strings) out. The
registry of tables (``analysis.tables``) is imported from its module, not re-exported here:
it imports the chart builders, and a package whose ``__init__`` imports a module that imports
the package back is a cycle that concurrent first imports (the app's warm-up thread beside a
page) can trip over.
"""

from analysis.failures import (
    failure_distribution,
    provenance_share,
    turns_per_category,
    wilson_interval,
)
from analysis.labeller import labeller_agreement
from analysis.passk import pass_k, pass_k_wide
from analysis.robustness import paired_outcomes, robustness, robustness_wide
from analysis.success import success_grid, success_long
from analysis.turns import success_by_turn_budget, turns_table

__all__ = [
    "failure_distribution",
    "labeller_agreement",
    "paired_outcomes",
    "pass_k",
    "pass_k_wide",
    "provenance_share",
    "robustness",
    "robustness_wide",
    "success_by_turn_budget",
    "success_grid",
    "success_long",
    "turns_per_category",
    "turns_table",
    "wilson_interval",
]
