"""Inter-rater agreement statistics.

Pure functions over contingency tables and label sequences; nothing here touches a database.

Where a well-kept implementation exists it is used (statsmodels for Cohen's kappa with its
asymptotic standard error and for Fleiss' kappa, scikit-learn for precision/recall); the
coefficients without one in our dependencies (Gwet's AC1, Brennan-Prediger/PABAK, the Byrt
prevalence and bias indices, Krippendorff's alpha from value counts) are written out here and
cross-checked in the tests against published worked examples.

One concern per module; import from this package, which re-exports the public API:

1. `pairwise` -- two raters: raw agreement, Cohen's kappa with CI, confusion matrix,
   Brennan-Prediger/PABAK, Gwet's AC1, the 2x2 summary, kappa per rater pair, labeller vs human
   (and the contingency-table convention they share);
2. `multirater` -- any number of raters: Fleiss' kappa, Krippendorff's alpha (nominal);
3. `explain` -- the plain-language kappa-paradox note the figures choose, and its thresholds.
"""

from labeling.agreement.multirater import (
    fleiss_kappa,
    krippendorff_alpha_nominal,
    krippendorff_alpha_nominal_from_counts,
)
from labeling.agreement.pairwise import (
    OVERALL_ROW,
    BinaryAgreement,
    KappaResult,
    PairResult,
    binary_agreement,
    brennan_prediger,
    cohens_kappa,
    cohens_kappa_from_labels,
    confusion_matrix,
    gwet_ac1,
    labeller_vs_human,
    pabak,
    pairwise_cohens,
    raw_agreement,
)

__all__ = [
    "OVERALL_ROW",
    "BinaryAgreement",
    "KappaResult",
    "PairResult",
    "binary_agreement",
    "brennan_prediger",
    "cohens_kappa",
    "cohens_kappa_from_labels",
    "confusion_matrix",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha_nominal",
    "krippendorff_alpha_nominal_from_counts",
    "labeller_vs_human",
    "pabak",
    "pairwise_cohens",
    "raw_agreement",
]
