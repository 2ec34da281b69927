"""Agreement (leads and admins): how consistently people label, how often they overrule the
LLM, and how far the automatic verdicts agree with people's. Pairwise Cohen's kappa with 95%
CI, Fleiss' kappa and Krippendorff's alpha for 3+ raters, confusion matrices, LLM-vs-human per
category, the verdict report. Every table downloads as CSV."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd
import streamlit as st

from analysis.calibration import calibration_tables, reliability_chart
from analysis.labeller import PRELABEL_SLICES, llm_vs_human
from analysis.sources import labeller_pairs
from analysis.verdicts import verdict_frame, verdict_report
from faillab.app.auth import require_user
from faillab.app.state import get_settings, get_store, get_store_for, workspace
from faillab.app.viewer import viewer_of
from faillab.app.widgets.prelabel_confirmations import confirmations
from faillab.app.widgets.rubric import category_initials, category_label
from faillab_core.textsafe import csv_frame
from labeling.rater_agreement import (
    latest_human_labels,
    multi_rater_summary,
    pair_confusion,
    pairwise_table,
    step_agreement,
)
from labeling.store import Viewer
from labeling.store.records import Role
from opinions.learn.calibration_store import (
    calibration_report,
    classifier_observations,
    workspace_observations,
)
from taxonomy import default_taxonomy

st.title("Agreement")
me = viewer_of(require_user(Role.LEAD, Role.ADMIN))
store = get_store()
taxonomy = default_taxonomy()


def download(frame: pd.DataFrame, name: str, *, index: bool = False) -> None:
    st.download_button(f"Download {name}.csv", csv_frame(frame).to_csv(index=index).encode("utf-8"),
                       file_name=f"{name}.csv", mime="text/csv", key=f"agreement_dl_{name}")


versions = [taxonomy.version, *[v for v in store.taxonomies.versions() if v != taxonomy.version]]
version = st.selectbox("Taxonomy version", versions, key="agreement_version",
                       help="Labels made under different rubrics are never pooled.")
keys = list(taxonomy.keys)
ratings = latest_human_labels(store, version, viewer=me)
if len(ratings) < 2:
    st.info("Agreement needs at least two annotators who labelled the same items.")
else:
    st.subheader("Annotator pairs: Cohen's kappa")
    pairs = pairwise_table(ratings)
    st.dataframe(pairs, hide_index=True, key="agreement_pairs", column_config={
        c: st.column_config.NumberColumn(c, format="%.3f")
        for c in ("raw_agreement", "kappa", "ci_low", "ci_high")})
    st.caption("95% CI from the asymptotic standard error; pairs with no shared items have "
               "no kappa.")
    download(pairs, "pairwise_kappa")

    if len(ratings) >= 3:
        st.subheader("All raters")
        multi = multi_rater_summary(ratings, keys)
        c1, c2, c3 = st.columns(3)
        c1.metric("Items with 2+ labels", multi.items_rated_twice)
        c2.metric("Fleiss' kappa", "—" if multi.fleiss_kappa is None
                  else f"{multi.fleiss_kappa:.3f}",
                  help=f"Over the {multi.fleiss_items} items with exactly "
                       f"{multi.fleiss_raters_per_item} labels (Fleiss needs a fixed count).")
        c3.metric("Krippendorff's alpha (nominal)", "—" if multi.krippendorff_alpha is None
                  else f"{multi.krippendorff_alpha:.3f}")
        download(pd.DataFrame([asdict(multi)]), "multi_rater")

    st.subheader("Confusion matrix")
    labels = [f"{p.rater_a} vs {p.rater_b}" for p in pairs.itertuples() if p.n_items]
    if labels:
        pick = st.selectbox("Pair", labels, key="agreement_pair")
        a, b = str(pick).split(" vs ", 1)
        matrix = pair_confusion(ratings, a, b, keys)
        names = [category_label(taxonomy, str(c)) for c in matrix.index]
        shown = matrix.set_axis(names, axis=0).set_axis(names, axis=1)
        shown.index.name, shown.columns.name = f"{a} (rows)", f"{b} (columns)"
        # Columns by initials (the rows' order, full names as tooltips) so all six fit.
        heads = category_initials(names)
        st.dataframe(shown.set_axis(heads, axis=1), key="agreement_confusion", column_config={
            "_index": st.column_config.TextColumn(f"{a} (rows) · {b} (columns)", width=200),
            **{h: st.column_config.NumberColumn(h, help=n, width=60)
               for h, n in zip(heads, names, strict=True)}})
        if heads != names:
            st.caption(" · ".join(f"{h} = {n}" for h, n in zip(heads, names, strict=True)))
        download(shown, f"confusion_{a}_{b}", index=True)
    else:
        st.caption("No pair of annotators has labelled the same item yet.")

st.subheader("First faulty step")
steps = step_agreement(store, version, viewer=me)
s1, s2, s3 = st.columns(3)
s1.metric("Step agreement (exact)", "—" if steps.raw_agreement is None
          else f"{steps.raw_agreement:.1%}",
          help="Share of annotator pairs on the same item who marked the same first faulty step.")
s2.metric("Pairs compared", steps.pairs)
s3.metric("Labels left out", steps.excluded_labels,
          help="No step chosen, or the pre-label's step accepted: those would measure the "
               "pre-labeller, not the people.")
st.caption("Counted only over steps people chose themselves.")

st.subheader("LLM pre-label vs people")
# The same pairs and the same computation as the Statistics page's labeller table.
# People's own labels first: accepting a pre-label (A) confirms it, whether or not the item
# has a final label yet (the comparison below waits for one).
confirmed = confirmations(store.labels.frame(taxonomy_version=version, viewer=me),
                          store.prelabels.opinions(version))
if confirmed.empty:
    st.info("Nobody has labelled a pre-labelled item yet.")
else:
    st.caption("Pre-labels people confirmed: each person's latest label on a pre-labelled "
               "item. Accepted = the pre-label's category kept with the pre-label on screen "
               "(A, or the same key); labels made with it hidden are counted apart.")
    st.dataframe(confirmed, hide_index=True, key="agreement_confirmed", column_config={
        "acceptance_rate": st.column_config.NumberColumn("acceptance_rate", format="%.3f")})
    download(confirmed, "prelabel_confirmations")
comparisons = llm_vs_human(labeller_pairs(store, version, viewer=me), keys)
if not comparisons:
    st.info("No item has a final human label beside a pre-label yet: the comparison per "
            "category waits until an item's annotators agree (or a lead decides).")
else:
    st.caption("One comparison per item: the people's verdict (its final label, when people "
               "stand behind it) against the LLM's. Override rate = share of the LLM's choices "
               "of a category that people changed. Items judged with the pre-label hidden give "
               "the honest override rate; those where someone saw it may be anchored.")
    tabs = st.tabs([s for s in PRELABEL_SLICES if s in comparisons])
    for tab, name in zip(tabs, [s for s in PRELABEL_SLICES if s in comparisons], strict=True):
        with tab:
            frame = comparisons[name].copy()
            frame["category"] = [category_label(taxonomy, str(c)) if c in keys else c
                                 for c in frame["category"]]
            st.dataframe(frame, hide_index=True, key=f"agreement_llm_{name}",
                         column_config={c: st.column_config.NumberColumn(c, format="%.3f")
                                        for c in ("precision", "recall", "f1", "kappa",
                                                  "override_rate")})
            download(frame, f"llm_vs_human_{name.replace(' ', '_')}")

@st.cache_data(ttl=30, show_spinner=False, max_entries=8)
def calibration_frames(url: str, version: str, viewer: Viewer, with_classifier: bool
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each labeller's calibration as ``viewer`` may see the labels; kept for half a minute,
    since it reads every pre-label and the page reruns on each widget change."""
    found = get_store_for(url)
    observations = workspace_observations(found, version, viewer)
    if with_classifier:
        observations += classifier_observations(workspace(), found, version, viewer)
    return calibration_tables(*calibration_report(observations))


st.subheader("Calibrated confidence")
# Each labeller's raw confidence against how often people agreed with it, on the items people
# checked (the same computation as `faillab stats labeller --calibration`). The classifier is
# cross-validated on the confirmed labels, which takes seconds, so it is measured on request.
with_classifier = st.toggle("Measure the classifier too (cross-validated on the checked items)",
                            key="agreement_calibration_classifier")
with st.spinner("Measuring each labeller's calibration..."):
    summary, bins = calibration_frames(get_settings().annotations_url(), version, me,
                                       with_classifier)
if summary.empty:
    st.info("No labeller has a measured calibration yet.")
else:
    st.caption("Per labeller and category it proposed: the items people checked, the share "
               "people agreed with, the mean raw confidence and the mean calibrated "
               "probability of agreeing. ECE (the calibration error: the items-weighted gap "
               "between predicted and observed agreement over ten bins) is on each "
               "labeller's (all) row, raw and calibrated; the calibrated one is out of "
               "sample (each item scored by a map fitted without its fold). A labeller "
               "nobody here has checked shows its development-set measurement, where its "
               "prior comes from; an LLM nobody checked has none, and its probability is "
               "unknown. Refreshed every 30 s.")
    # Short headers and narrow number columns: nine columns fit the centred page at 1280 px
    # (the full names are in the download and in each header's help).
    short = {"agreement": "agreed", "mean_raw": "raw", "mean_calibrated": "calibrated",
             "ece_raw": "ECE raw", "ece_calibrated": "ECE cal."}
    st.dataframe(summary, hide_index=True, key="agreement_calibration",
                 column_config={
                     "labeller": st.column_config.TextColumn("labeller", width=100),
                     "category": st.column_config.TextColumn("category", width=140),
                     "measured_on": st.column_config.TextColumn("measured on", width=110),
                     "checked": st.column_config.NumberColumn("checked", width=60),
                     **{c: st.column_config.NumberColumn(label, format="%.3f", width=66,
                                                         help=c)
                        for c, label in short.items()}})
    download(summary, "labeller_calibration")
    names = list(dict.fromkeys(summary["labeller"].astype(str)))
    pick = st.selectbox("Reliability curve of", names, key="agreement_calibration_labeller")
    st.plotly_chart(reliability_chart(bins, str(pick)), key="agreement_reliability")
    download(bins, "labeller_reliability")

st.subheader("Automatic verdicts vs people")
# The same report as `faillab verdicts report`: people's verdicts (the store's, as this lead
# may see them, and verdict columns a file recorded as a person's) against the judge's rules.
report = verdict_report(verdict_frame(workspace(), store.verdicts.effective(me)))
if report.n == 0:
    st.info("No trajectory has a person's verdict yet: give one with Y / N on Annotate or the "
            "Trajectory page, or import a results file with a verdict column.")
else:
    v1, v2, v3, v4 = st.columns(4)
    v1.metric("Trajectories with a person's verdict", report.n)
    v2.metric("Judge agrees", f"{report.agree / report.n:.1%}",
              help="An undecided verdict counts as not agreeing.")
    v3.metric("Undecided", report.undecided, help="The rules could not tell: a person decides.")
    kappa = report.kappa
    v4.metric("Cohen's kappa (decided)", "—" if kappa is None or kappa.kappa != kappa.kappa
              else f"{kappa.kappa:.3f}",
              help=None if kappa is None else f"95% CI {kappa.ci_low:.3f} to {kappa.ci_high:.3f}"
              f" over {kappa.n} decided trajectories")
    st.dataframe(report.confusion, key="agreement_verdict_confusion")
    st.dataframe(report.by_method, hide_index=True, key="agreement_verdict_methods")
    if len(report.disagreements):
        st.caption("Where the judge and people differ, with the judge's evidence:")
        st.dataframe(report.disagreements, hide_index=True, key="agreement_verdict_off")
        download(report.disagreements, "verdict_disagreements")
