"""The Streamlit workbench. UI only: every decision lives in the domain packages.

Imported as ``faillab.app`` (``faillab/app`` links to this folder), so the install puts no
package named plain ``app`` on the path; ``faillab serve`` runs this folder's ``main.py``.
"""
