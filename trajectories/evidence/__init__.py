"""Evidence before opinion: where an agent's queries leave the reference SQL's path.

``find_divergence(trajectory, db_path)`` returns an ``Evidence``; ``Probe`` executes the parts
read-only in the SQL sandbox and can be shared over many trajectories of one database.
"""

from __future__ import annotations

from trajectories.evidence.finder import CALIBRATION, Evidence, find_divergence
from trajectories.evidence.parts import Divergence, RefParts, compare, decompose
from trajectories.evidence.probes import Probe

__all__ = [
    "CALIBRATION",
    "Divergence",
    "Evidence",
    "Probe",
    "RefParts",
    "compare",
    "decompose",
    "find_divergence",
]
