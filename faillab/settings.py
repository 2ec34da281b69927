"""The one settings object. Every knob has a name, a default, an environment variable and a
line of help; docs/settings.md is generated from this table and a test keeps them in step."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: Any
    help: str


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
            "How people sign in: none (pick a display name), password, or oidc (st.login)."),
    Setting("host", "FAILLAB_HOST", "127.0.0.1",
            "Address `faillab serve` listens on; anything beyond loopback needs auth password or "
            "oidc (or --allow-unauthenticated-network)."),
    Setting("session_hours", "FAILLAB_SESSION_HOURS", 12.0,
            "How long a sign-in lasts across reloads, tabs and deep links."),
    Setting("signin_free_attempts", "FAILLAB_SIGNIN_FREE_ATTEMPTS", 5,
            "Failed sign-ins allowed per user and per client before exponential back-off starts."),
    Setting("signin_concurrency", "FAILLAB_SIGNIN_CONCURRENCY", 2,
            "Most password checks (argon2, ~64 MiB each) running at once per server process."),
    Setting("blind", "FAILLAB_BLIND", True,
            "Annotators never see another annotator's label on an item."),
    Setting("hide_prelabel", "FAILLAB_HIDE_PRELABEL", False,
            "Hide the LLM pre-label until the annotator has committed (against anchoring)."),
    Setting("prelabel_threshold", "FAILLAB_PRELABEL_THRESHOLD", 0.7,
            "Pre-labels below this confidence go to people first."),
    Setting("spot_check_share", "FAILLAB_SPOT_CHECK_SHARE", 0.1,
            "Share of confident pre-labels also sent to people as spot checks."),
    # On once 20 labels are confirmed: fewer teach the classifier little (it needs 10 in two
    # categories at least). The features come from the evidence stored beside pre-labels and are
    # computed in the background, so no page run waits for them.
    Setting("rerank_min_labels", "FAILLAB_RERANK_MIN_LABELS", 20,
            "Once this many failures have confirmed human labels, the Annotate queue puts the "
            "items the offline classifier is least sure of first; 0 keeps the store's order."),
    Setting("sql_timeout_s", "FAILLAB_SQL_TIMEOUT", 5.0,
            "Time limit for re-running SQL in the sandbox, in seconds."),
    Setting("sql_row_cap", "FAILLAB_SQL_ROW_CAP", 1000,
            "Most rows a sandboxed query returns."),
    Setting("gemini_model", "FAILLAB_GEMINI_MODEL", "gemini-2.5-pro",
            "Model used by the Gemini pre-labeller."),
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
            "or one of json_schema, json_object, text."),
    Setting("openai_timeout_s", "FAILLAB_OPENAI_TIMEOUT", 120.0,
            "Seconds to wait for one answer from that server (local models can be slow)."),
    Setting("openai_own_hosts", "FAILLAB_OPENAI_OWN_HOSTS", "",
            "Comma-separated host names of the team's own servers; like localhost and private "
            "IP addresses, they need no acknowledgement to receive trajectories "
            "(docs/privacy.md)."),
    Setting("openai_price_per_mtok", "FAILLAB_OPENAI_PRICE_PER_MTOK", "",
            "INPUT,OUTPUT prices in USD per 1M tokens for the cost estimate of that server; "
            "empty means no per-token price (your own server)."),
)


def _coerce(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


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
    rerank_min_labels: int
    sql_timeout_s: float
    sql_row_cap: int
    gemini_model: str
    gemini_base_url: str
    vertex_project: str
    vertex_location: str
    openai_base_url: str
    openai_api_key: str = field(repr=False)
    openai_model: str
    openai_response_format: str
    openai_timeout_s: float
    openai_own_hosts: str
    openai_price_per_mtok: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        for s in SETTINGS:
            raw = env.get(s.env)
            values[s.name] = _coerce(raw, s.default) if raw not in (None, "") else s.default
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["workspace"] = Path(values["workspace"])
        return cls(**values)

    def annotations_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.workspace / 'annotations.sqlite').resolve()}"


assert {f.name for f in fields(Settings)} == {s.name for s in SETTINGS}
