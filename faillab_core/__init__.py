"""The bottom layer every package may import: settings, text safety, the error root, shared enums.

Nothing here imports another faillab package; the domain (trajectories, taxonomy) sits directly
above it, then labeling, analysis, and the faces (app/, the CLI) on top.
"""
