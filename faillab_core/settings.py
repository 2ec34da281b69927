"""The one settings object. Every knob has a name, a default, an environment variable and a
line of help; docs/settings.md is generated from this table and a test keeps them in step.

Values are validated once, when the settings are read: a boolean is one of true/false, 1/0,
yes/no, on/off; a duration may carry its unit (``5s``, ``500ms``, ``2m``, ``12h``); a choice
must be one of its values; a share lies between 0 and 1. Anything else is a ``SettingsError``
naming the variable, the value and what it accepts, and `faillab serve`, every CLI command and
the app refuse to start on it (``FAILLAB_BLIND=ture`` once meant "blind mode off")."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from faillab_core.errors import FaillabError

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


class AuthMode(StrEnum):
    """Who may open the app: anyone who reaches it (loopback only), a stored password, or a
    single sign-on provider in front of Streamlit."""

    NONE = "none"
    PASSWORD = "password"
    OIDC = "oidc"


AUTH_MODES: tuple[str, ...] = tuple(m.value for m in AuthMode)
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text")
#: Seconds per unit of a duration.
_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-z]*)\s*$")


#: The workspace's own annotation store when no database is configured.
ANNOTATIONS_FILE = "annotations.sqlite"


def sqlite_store_url(workspace: Path) -> str:
    """The SQLAlchemy URL of a workspace's own SQLite annotation store."""
    return f"sqlite:///{(workspace / ANNOTATIONS_FILE).resolve()}"


class SettingsError(FaillabError, ValueError):
    """A setting's value cannot be used; the message names the variable and what it takes."""


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: Any
    help: str
    #: The values a text setting may take (None: any text).
    choices: tuple[str, ...] | None = None
    #: For a duration: the unit a bare number is in ("s" or "h"); None: not a duration.
    unit: str | None = None
    #: Inclusive bounds of a number.
    minimum: float | None = None
    maximum: float | None = None

    def accepts(self) -> str:
        """What the setting takes, in words (error messages and docs/settings.md)."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if isinstance(self.default, bool):
            return "true or false (also 1/0, yes/no, on/off)"
        if isinstance(self.default, str):
            return "text"
        if self.unit is not None:
            return (f"a duration: a number of {'seconds' if self.unit == 's' else 'hours'}, "
                    "or with a unit (ms, s, m, h, d)")
        kind = "a whole number" if isinstance(self.default, int) else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f"{kind} of at least {self.minimum:g}"
        return kind

    def parse(self, raw: str) -> Any:
        """The value of ``raw`` for this setting, or a ``SettingsError``."""
        value = _parse(self, raw.strip())
        if value is None:
            raise SettingsError(f"{self.env}={raw!r} is not valid: expected {self.accepts()}")
        return value


SETTINGS: tuple[Setting, ...] = (
    Setting("workspace", "FAILLAB_WORKSPACE", "workspace",
            "Workspace directory (trajectories, EHR database, default annotation store)."),
    Setting("trajectories_url", "FAILLAB_TRAJECTORIES_URL", "",
            "Where the trajectory parts live: empty means the workspace's trajectories/ folder; "
            "s3://bucket/prefix keeps them in an S3-compatible object store (docs/deploy.md)."),
    Setting("s3_endpoint", "AWS_ENDPOINT_URL", "",
            "Object store address for s3:// URLs (MinIO, Ceph, a local test server); empty "
            "means AWS S3."),
    Setting("s3_region", "AWS_REGION", "",
            "Object store region for s3:// URLs; empty lets the AWS SDK decide."),
    Setting("s3_access_key_id", "AWS_ACCESS_KEY_ID", "",
            "Object store access key; empty falls back to the AWS SDK's usual sources "
            "(~/.aws, instance roles)."),
    Setting("s3_secret_access_key", "AWS_SECRET_ACCESS_KEY", "",
            "Object store secret key (never printed)."),
    Setting("s3_session_token", "AWS_SESSION_TOKEN", "",
            "Temporary-credential session token, when the access key is temporary."),
    Setting("database_url", "FAILLAB_DATABASE_URL", "",
            "Annotation store URL; empty means a SQLite file inside the workspace. "
            "Teams use postgresql+psycopg://user@host/db."),
    Setting("auth", "FAILLAB_AUTH", "none",
            "How people sign in: none (pick a display name), password, or oidc (st.login).",
            choices=AUTH_MODES),
    Setting("host", "FAILLAB_HOST", "127.0.0.1",
            "Address `faillab serve` listens on; anything beyond loopback needs auth password or "
            "oidc (or --allow-unauthenticated-network)."),
    Setting("session_hours", "FAILLAB_SESSION_HOURS", 12.0,
            "How long a sign-in lasts across reloads, tabs and deep links.", unit="h",
            minimum=0.0),
    Setting("signin_free_attempts", "FAILLAB_SIGNIN_FREE_ATTEMPTS", 5,
            "Failed sign-ins allowed per user and per client before exponential back-off starts.",
            minimum=1),
    Setting("signin_concurrency", "FAILLAB_SIGNIN_CONCURRENCY", 2,
            "Most password checks (argon2, ~64 MiB each) running at once per server process.",
            minimum=1),
    Setting("blind", "FAILLAB_BLIND", True,
            "Annotators never see another annotator's label on an item."),
    Setting("hide_prelabel", "FAILLAB_HIDE_PRELABEL", False,
            "Hide the LLM pre-label until the annotator has committed (against anchoring)."),
    Setting("prelabel_threshold", "FAILLAB_PRELABEL_THRESHOLD", 0.7,
            "A pre-label at or above this confidence that a person overrides goes to a lead "
            "(Adjudicate). Who labels what is routing by measured trust (FAILLAB_ROUTING_*).",
            minimum=0.0, maximum=1.0),
    Setting("spot_check_share", "FAILLAB_SPOT_CHECK_SHARE", 0.1,
            "Share of trusted pre-labels also sent to people as spot checks.", minimum=0.0,
            maximum=1.0),
    Setting("take_overlap", "FAILLAB_TAKE_OVERLAP", 1,
            "How many people Annotate's Take may give the same item: 2 lets a second "
            "annotator take items a first one took, so agreement can be measured on them.",
            minimum=1, maximum=5),
    Setting("routing_target", "FAILLAB_ROUTING_TARGET", 0.9,
            "A pre-label is left to its labeller only when its calibrated probability of "
            "agreeing with people reaches this.", minimum=0.0, maximum=1.0),
    Setting("routing_min_checked", "FAILLAB_ROUTING_MIN_CHECKED", 30,
            "A pre-label is left to its labeller only when people have checked at least this "
            "many of that labeller's items in its category.", minimum=0),
    # On once 20 labels are confirmed: fewer teach the classifier little (it needs 10 in two
    # categories at least). The features come from the evidence stored beside pre-labels and are
    # computed in the background, so no page run waits for them.
    Setting("rerank_min_labels", "FAILLAB_RERANK_MIN_LABELS", 20,
            "Once this many failures have confirmed human labels, the Annotate queue puts the "
            "items the offline classifier is least sure of first; 0 keeps the store's order.",
            minimum=0),
    Setting("sql_timeout_s", "FAILLAB_SQL_TIMEOUT", 5.0,
            "Time limit for re-running SQL in the sandbox, in seconds.", unit="s"),
    Setting("sql_row_cap", "FAILLAB_SQL_ROW_CAP", 1000,
            "Most rows a sandboxed query returns.", minimum=1),
    Setting("gemini_model", "FAILLAB_GEMINI_MODEL", "gemini-2.5-pro",
            "Model used by the Gemini pre-labeller."),
    Setting("gemini_timeout_s", "FAILLAB_GEMINI_TIMEOUT", 60.0,
            "Total time one Gemini request may take (connect, headers and body, whatever the "
            "server does), in seconds; also each Batch API call.", unit="s"),
    Setting("gemini_base_url", "GOOGLE_GEMINI_BASE_URL", "",
            "Override of the Gemini API address (tests point it at a local fake server)."),
    Setting("vertex_project", "GOOGLE_CLOUD_PROJECT", "",
            "Vertex AI project; with it the Gemini labeller uses Vertex AI."),
    Setting("vertex_location", "GOOGLE_CLOUD_LOCATION", "us-central1",
            "Vertex AI location."),
    Setting("openai_base_url", "FAILLAB_OPENAI_BASE_URL", "",
            "OpenAI-compatible server for `--labeler openai-compatible` and the LLM judge, "
            "e.g. http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama), "
            "http://localhost:1234/v1 (LM Studio), https://RESOURCE.openai.azure.com/openai/v1/ "
            "(Azure OpenAI)."),
    Setting("openai_api_key", "FAILLAB_OPENAI_API_KEY", "",
            "API key for that server (never printed); local servers usually need none."),
    Setting("openai_model", "FAILLAB_OPENAI_MODEL", "",
            "Model name as that server knows it (Azure OpenAI: the deployment name)."),
    Setting("openai_response_format", "FAILLAB_OPENAI_RESPONSE_FORMAT", "auto",
            "How answers are asked for: auto (json_schema, else json_object, else plain text), "
            "or one of json_schema, json_object, text.", choices=RESPONSE_FORMATS),
    Setting("openai_timeout_s", "FAILLAB_OPENAI_TIMEOUT", 120.0,
            "Total time one answer from that server may take (connect, headers and body, "
            "whatever the server does), in seconds (local models can be slow).", unit="s"),
    Setting("openai_own_hosts", "FAILLAB_OPENAI_OWN_HOSTS", "",
            "Comma-separated host names of the team's own servers; like localhost and private "
            "IP addresses, they need no acknowledgement to receive trajectories "
            "(docs/privacy.md)."),
    Setting("openai_trust_private", "FAILLAB_OPENAI_TRUST_PRIVATE", True,
            "Private, link-local and shared IP addresses (and names that resolve only to them) "
            "count as the team's own machines; off, only loopback and the listed host names do "
            "(docs/privacy.md)."),
    Setting("openai_price_per_mtok", "FAILLAB_OPENAI_PRICE_PER_MTOK", "",
            "INPUT,OUTPUT prices in USD per 1M tokens for the cost estimate of that server; "
            "empty means no per-token price (your own server)."),
    Setting("llm_item_deadline_s", "FAILLAB_LLM_ITEM_DEADLINE", 900.0,
            "Total time for one item's LLM requests and the pauses between its retries "
            "(pre-labelling, the LLM judge); then the item fails and a later run asks again.",
            unit="s"),
    Setting("llm_run_deadline_h", "FAILLAB_LLM_RUN_DEADLINE", 24.0,
            "Total time for one pre-labelling or LLM judge run; what is not answered by then "
            "fails and a later run asks again (what was answered is kept).", unit="h"),
    Setting("batch_deadline_h", "FAILLAB_BATCH_DEADLINE", 48.0,
            "How long `faillab prelabel --batch --wait` polls before it stops with an error "
            "(the jobs keep running: the same command collects them later).", unit="h"),
)


def _parse(setting: Setting, raw: str) -> Any:
    """The value, or None when ``raw`` is not one the setting takes."""
    default = setting.default
    if setting.choices is not None:
        return raw.lower() if raw.lower() in setting.choices else None
    if isinstance(default, bool):
        word = raw.lower()
        return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None
    if setting.unit is not None:
        match = _DURATION.match(raw.lower())
        if match is None or (match.group(2) and match.group(2) not in _UNITS):
            return None
        seconds = float(match.group(1)) * _UNITS[match.group(2) or setting.unit]
        value = seconds / _UNITS[setting.unit]
        # A time limit of zero would refuse everything (or wait forever): say so now.
        return value if math.isfinite(value) and value > 0 else None
    number: float
    if isinstance(default, int):
        try:
            number = int(raw)
        except ValueError:
            return None
    elif isinstance(default, float):
        try:
            number = float(raw)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
    else:
        return raw
    if (setting.minimum is not None and number < setting.minimum) or (
            setting.maximum is not None and number > setting.maximum):
        return None
    return number


@dataclass(frozen=True)
class Settings:
    workspace: Path
    trajectories_url: str
    s3_endpoint: str
    s3_region: str
    # Secrets stay out of repr(): settings objects end up in logs and tracebacks.
    s3_access_key_id: str = field(repr=False)
    s3_secret_access_key: str = field(repr=False)
    s3_session_token: str = field(repr=False)
    database_url: str
    auth: str
    host: str
    session_hours: float
    signin_free_attempts: int
    signin_concurrency: int
    blind: bool
    hide_prelabel: bool
    prelabel_threshold: float
    spot_check_share: float
    take_overlap: int
    routing_target: float
    routing_min_checked: int
    rerank_min_labels: int
    sql_timeout_s: float
    sql_row_cap: int
    gemini_model: str
    gemini_timeout_s: float
    gemini_base_url: str
    vertex_project: str
    vertex_location: str
    openai_base_url: str
    openai_api_key: str = field(repr=False)
    openai_model: str
    openai_response_format: str
    openai_timeout_s: float
    openai_own_hosts: str
    openai_trust_private: bool
    openai_price_per_mtok: str
    llm_item_deadline_s: float
    llm_run_deadline_h: float
    batch_deadline_h: float

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """The settings of ``env`` (default: the process environment); ``SettingsError`` on
        the first value a setting does not take. ``overrides`` (from command-line options)
        win over the environment."""
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        for s in SETTINGS:
            raw = env.get(s.env)
            values[s.name] = s.parse(raw) if raw not in (None, "") else s.default
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["workspace"] = Path(values["workspace"])
        return cls(**values)

    def annotations_url(self) -> str:
        if self.database_url:
            return self.database_url
        return sqlite_store_url(self.workspace)

    def has_annotation_store(self) -> bool:
        """A configured database, or a workspace whose SQLite store file exists. Readers ask
        first: opening a SQLite store creates its file, and browsing must not."""
        return bool(self.database_url) or (self.workspace / ANNOTATIONS_FILE).exists()


assert {f.name for f in fields(Settings)} == {s.name for s in SETTINGS}
