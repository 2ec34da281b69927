"""Machine opinions on why a trajectory failed: pre-labellers (the offline heuristic and LLMs),
the LLM verdict judge, calibration and routing by measured trust, the classifier and its
ranking, clusters of look-alike failures. Reads trajectories and the annotation store; the
store never reads this package."""
