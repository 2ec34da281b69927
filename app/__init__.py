"""The Streamlit workbench. UI only: every decision lives in the domain packages."""
