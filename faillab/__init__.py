"""EHR Failure Lab: settings and the command-line face over the domain packages."""
