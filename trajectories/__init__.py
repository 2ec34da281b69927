"""Trajectory domain: the native format, importers, scoring, the workspace and the SQL sandbox."""
