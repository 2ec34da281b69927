"""The annotation-store fixtures (tests/store_fixtures.py) for the tests in this folder."""

from tests.store_fixtures import (  # noqa: F401 - pytest finds fixtures by name
    db_url,
    postgres_database,
    postgres_store_url,
    sqlite_template,
    store,
    team,
)
