"""Settings are validated once: a value a setting does not take is an error naming the variable
and what it accepts, and the CLI, `faillab serve` and the app refuse to start on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from faillab.cli import main
from faillab_core.settings import SETTINGS, Settings, SettingsError
from tests.support import REPO


@pytest.mark.parametrize(("variable", "value"), [
    ("FAILLAB_BLIND", "ture"),  # once silently "blind mode off"
    ("FAILLAB_BLIND", "2"),
    ("FAILLAB_AUTH", "pasword"),  # once "no sign-in" in the app
    ("FAILLAB_SQL_TIMEOUT", "5 parsecs"),
    ("FAILLAB_SQL_TIMEOUT", "0"),
    ("FAILLAB_SQL_ROW_CAP", "1.5"),
    ("FAILLAB_PRELABEL_THRESHOLD", "nan"),
    ("FAILLAB_SPOT_CHECK_SHARE", "1.2"),
    ("FAILLAB_OPENAI_RESPONSE_FORMAT", "xml"),
])
def test_a_bad_value_names_the_variable_and_what_it_takes(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({variable: value})
    message = str(caught.value)
    setting = next(s for s in SETTINGS if s.env == variable)
    assert message.startswith(f"{variable}={value!r} is not valid")
    assert setting.accepts() in message


@pytest.mark.parametrize(("variable", "value", "name", "expected"), [
    ("FAILLAB_BLIND", "No", "blind", False),
    ("FAILLAB_BLIND", "on", "blind", True),
    ("FAILLAB_HIDE_PRELABEL", "1", "hide_prelabel", True),
    ("FAILLAB_SQL_TIMEOUT", "5s", "sql_timeout_s", 5.0),
    ("FAILLAB_SQL_TIMEOUT", "500ms", "sql_timeout_s", 0.5),
    ("FAILLAB_SQL_TIMEOUT", "2m", "sql_timeout_s", 120.0),
    ("FAILLAB_SQL_TIMEOUT", "7.5", "sql_timeout_s", 7.5),
    ("FAILLAB_SESSION_HOURS", "30m", "session_hours", 0.5),
    ("FAILLAB_SESSION_HOURS", "2d", "session_hours", 48.0),
    ("FAILLAB_AUTH", "Password", "auth", "password"),
])
def test_good_values_in_every_accepted_form(variable: str, value: str, name: str,
                                            expected: object) -> None:
    assert getattr(Settings.from_env({variable: value}), name) == expected


def test_every_choice_and_default_is_accepted() -> None:
    for setting in SETTINGS:
        for choice in setting.choices or ():
            assert setting.parse(choice) == choice
        if setting.default not in ("", None):
            assert setting.parse(str(setting.default).lower()) == setting.default


def test_the_cli_refuses_to_run_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["summary", "--workspace", str(tmp_path)],
                                env={"FAILLAB_BLIND": "ture"})
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: FAILLAB_BLIND='ture' is not valid: expected true or false (also 1/0, yes/no, "
        "on/off)"]
    faillab = str(Path(sys.executable).parent / "faillab")
    served = subprocess.run([faillab, "serve", "--workspace", str(tmp_path)],
                            env={**os.environ, "FAILLAB_AUTH": "pasword"},
                            capture_output=True, text=True, timeout=60)
    assert served.returncode == 1
    assert served.stderr.strip().splitlines() == [
        "error: FAILLAB_AUTH='pasword' is not valid: expected one of none, password, oidc"]


def test_the_app_refuses_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("FAILLAB_AUTH", "pasword")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert any("FAILLAB_AUTH='pasword'" in e.value for e in at.error)
    # Nothing behind the gate was drawn: no menu, no page, no sign-in form.
    assert not at.text_input and not at.button
