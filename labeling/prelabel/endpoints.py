"""Where an OpenAI-compatible server is, and whether it is one of the team's own machines.

Plain data, no SDK import: the options, the privacy interlock and the app page read it without
paying for the ``openai`` package. The SDK client is ``openai_compat.py``.

"Own machine" is decided from the address alone (no DNS lookup, which could be answered by
anyone): ``localhost`` and ``*.localhost``, loopback, private (RFC 1918, IPv6 unique-local),
link-local and shared (100.64.0.0/10, used by carrier-grade NAT and mesh VPNs) IP literals, and
the host names the team lists in ``FAILLAB_OPENAI_OWN_HOSTS``. The address says where a request
goes, not where that server forwards it: a local proxy to a cloud service is not "own".
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from faillab.core.settings import RESPONSE_FORMATS as SETTINGS_RESPONSE_FORMATS

if TYPE_CHECKING:
    from faillab.core.settings import Settings

__all__ = [
    "RESPONSE_FORMATS",
    "STRUCTURED_OUTPUT_MODES",
    "OpenAIEndpoint",
    "describe_structured_output",
    "endpoint_host",
    "is_own_address",
    "parse_prices",
]

# How answers are asked for (``auto`` tries json_schema, then json_object, then plain text):
# the settings' own list, so the setting and an endpoint built in code accept the same.
RESPONSE_FORMATS = SETTINGS_RESPONSE_FORMATS

# What each mode means for the answers, as the run report says it.
STRUCTURED_OUTPUT_MODES: dict[str, str] = {
    "json_schema": "json_schema (the server constrained answers to the schema)",
    "json_object": "json_object (the server does not take json_schema: it returned JSON, which "
                   "was checked against the schema after parsing)",
    "text": "text (the server takes no response_format: the JSON was parsed from the answer "
            "text and checked against the schema)",
    "response_schema": "response_schema (Gemini's structured output)",
}

_SHARED = ipaddress.ip_network("100.64.0.0/10")


def describe_structured_output(mode: str | None) -> str:
    if mode is None:
        return "not used (no request was sent)"
    return STRUCTURED_OUTPUT_MODES.get(mode, mode)


def endpoint_host(base_url: str) -> str:
    """The host name of ``base_url`` (lower case, no brackets), or "" when it has none."""
    try:
        return (urlsplit(base_url.strip()).hostname or "").lower()
    except ValueError:
        return ""


def is_own_address(base_url: str, own_hosts: tuple[str, ...] = ()) -> bool:
    """Whether requests to ``base_url`` stay on the team's own machines (see the module
    docstring). Anything unreadable is not."""
    host = endpoint_host(base_url)
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    if host in {h.strip().lower() for h in own_hosts if h.strip()}:
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone ("fe80::1%eth0")
    except ValueError:
        return False  # a name: only the listed ones count, DNS is not asked
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return (
        addr.is_loopback
        or addr.is_private
        or addr.is_link_local
        or (isinstance(addr, ipaddress.IPv4Address) and addr in _SHARED)
    ) and not addr.is_unspecified and not addr.is_multicast


def parse_prices(text: str) -> tuple[float, float] | None:
    """``"0.15,0.60"`` (USD per 1M input, output tokens) as a pair; "" as None."""
    if not text.strip():
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise ValueError(f"expected 'INPUT,OUTPUT' USD per 1M tokens, got {text!r}")
    try:
        prices = (float(parts[0]), float(parts[1]))
    except ValueError:
        raise ValueError(f"expected two numbers 'INPUT,OUTPUT', got {text!r}") from None
    if min(prices) < 0:
        raise ValueError(f"prices cannot be negative: {text!r}")
    return prices


@dataclass(frozen=True)
class OpenAIEndpoint:
    """An OpenAI-compatible chat-completions server and how to talk to it."""

    base_url: str
    api_key: str = field(default="", repr=False)  # secrets stay out of repr() and logs
    response_format: str = "auto"
    timeout_s: float = 120.0
    own_hosts: tuple[str, ...] = ()
    price_per_mtok: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"unknown response format {self.response_format!r}; choose one of "
                f"{', '.join(RESPONSE_FORMATS)}"
            )

    @property
    def own_machine(self) -> bool:
        return is_own_address(self.base_url, self.own_hosts)

    @classmethod
    def from_settings(cls, settings: Settings, *, base_url: str | None = None) -> OpenAIEndpoint:
        """The endpoint the settings describe (``base_url`` overrides theirs). ``ValueError``
        names a setting that cannot be read."""
        try:
            prices = parse_prices(settings.openai_price_per_mtok)
        except ValueError as e:
            raise ValueError(f"FAILLAB_OPENAI_PRICE_PER_MTOK: {e}") from None
        return cls(
            base_url=(base_url or settings.openai_base_url).strip(),
            api_key=settings.openai_api_key,
            response_format=settings.openai_response_format.strip().lower() or "auto",
            timeout_s=settings.openai_timeout_s,
            own_hosts=tuple(h.strip() for h in settings.openai_own_hosts.split(",") if h.strip()),
            price_per_mtok=prices,
        )
