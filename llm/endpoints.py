"""Where an OpenAI-compatible server is, and whether it is one of the team's own machines.

Plain data, no SDK import: the options, the privacy interlock and the app page read it without
paying for the ``openai`` package. The SDK client is ``openai_compat.py``.

An address is judged as the network will judge it, so that what the privacy notice calls "your
own machine" is where the request goes:

- The URL is read with the standard library and refused (``EndpointAddressError``, naming the
  problem) unless its host is plainly one name or one address: no user name or password before
  ``@``, no percent-encoding, backslashes or spaces, no non-ASCII name (write its ``xn--`` form),
  IPv4 only as four decimal numbers (``2130706433``, ``0x7f.1`` and ``0177.0.0.1`` mean
  127.0.0.1 to the C resolver and a name to a URL parser, so neither reading is trusted), and a
  ``%zone`` only inside a bracketed IPv6 literal (``[fe80::1%25eth0]``). The first finding of a
  review: ``10.0.0.1%2f.evil.com`` was cut at ``%`` and called private while the request went
  to a public name.
- An IP address (IPv4-mapped IPv6 as its IPv4): loopback is own; private (RFC 1918, IPv6
  unique-local), link-local and shared (100.64.0.0/10, carrier-grade NAT and mesh VPNs) are own
  only while ``trust_private`` (``FAILLAB_OPENAI_TRUST_PRIVATE``, on by default) says the local
  network is the team's.
- A name the team lists in ``FAILLAB_OPENAI_OWN_HOSTS`` is own (their statement). Names
  reserved for documentation and tests (``example.com``, ``*.example``, ``*.test``,
  ``*.invalid``) are never looked up and never own. Any other name, ``localhost`` included, is
  resolved, and is own only when every address it resolves to is own by the rule above; one
  that does not resolve is not own.

The address says where a request goes, not where that server forwards it: a local proxy to a
cloud service is not "own". A name is resolved when the decision is made and again by the HTTP
client when it connects; a DNS server that answers differently the second time is outside what
this check can see, which is why names resolving to private addresses count only under the same
``trust_private`` setting as the addresses themselves.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from faillab_core.errors import FaillabError
from faillab_core.settings import RESPONSE_FORMATS as SETTINGS_RESPONSE_FORMATS

if TYPE_CHECKING:
    from faillab_core.settings import Settings

__all__ = [
    "RESPONSE_FORMATS",
    "STRUCTURED_OUTPUT_MODES",
    "EndpointAddressError",
    "OpenAIEndpoint",
    "Resolver",
    "check_base_url",
    "describe_structured_output",
    "endpoint_host",
    "is_own_address",
    "parse_prices",
    "system_resolver",
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

#: ``resolve(host) -> addresses``: the IP addresses a name stands for (tests inject their own, so
#: that no test looks up a real public name).
Resolver = Callable[[str], Sequence[str]]

# One DNS label: letters, digits, hyphens (underscores too: container and service names use
# them), neither end a hyphen, at most 63 characters.
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
# What the C resolver's inet_aton reads as an IPv4 address in another notation.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_ZONE = re.compile(r"^[a-z0-9._~-]+$", re.I)
# RFC 2606 and RFC 6761 names: documentation and tests only, never looked up.
_RESERVED_NAMES = frozenset({"example.com", "example.net", "example.org"})
_RESERVED_TLDS = frozenset({"example", "test", "invalid"})


class EndpointAddressError(FaillabError, ValueError):
    """A base URL whose host is not plainly one name or one address; the message says why."""


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


def _bad(base_url: str, why: str) -> EndpointAddressError:
    return EndpointAddressError(f"the OpenAI-compatible server address {base_url!r}: {why}")


def check_base_url(
    base_url: str,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    """The host of ``base_url``: an IP address, or a lower-case ASCII name without a trailing
    dot. ``EndpointAddressError`` when the URL or its host is not plainly one name or one
    address (see the module docstring)."""
    url = base_url.strip()
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in url):
        raise _bad(base_url, "the address contains spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its check: a port that is not a number raises
    except ValueError as e:
        raise _bad(base_url, f"not a URL ({e})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise _bad(base_url, "the address must start with http:// or https://")
    netloc = parts.netloc
    if "@" in netloc:
        raise _bad(base_url, "a user name or password before '@' is not accepted in the "
                             "address (put the key in FAILLAB_OPENAI_API_KEY)")
    if netloc.startswith("["):
        literal, _, _rest = netloc[1:].partition("]")
        address, pct, zone = literal.partition("%")
        if pct:
            zone = zone[2:] if zone.startswith("25") else zone  # RFC 6874 writes % as %25
            if not _ZONE.match(zone):
                raise _bad(base_url, f"unreadable IPv6 zone {zone!r}")
        try:
            return ipaddress.IPv6Address(address)
        except ValueError:
            raise _bad(base_url, f"[{literal}] is not an IPv6 address") from None
    host = parts.hostname or ""
    if not host:
        raise _bad(base_url, "no host in the address")
    if "%" in host:
        raise _bad(base_url, "percent signs are allowed in a host only as the zone of a "
                             "bracketed IPv6 address, e.g. http://[fe80::1%25eth0]:8000/v1")
    if not host.isascii():
        raise _bad(base_url, "write a non-ASCII host name in its ASCII (xn--) form")
    host = host.lower()
    name = host[:-1] if host.endswith(".") else host
    try:
        ip4 = ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        if name != host:
            raise _bad(base_url, "an IP address cannot end in a dot")
        return ip4
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise _bad(base_url, f"{host!r} is not a valid host name")
    if _NUMERIC_LABEL.match(labels[-1]):
        raise _bad(base_url, f"{host!r} is neither a host name nor an IP address written as "
                             "four decimal numbers (e.g. 127.0.0.1)")
    return name


def system_resolver(host: str) -> list[str]:
    """The addresses the operating system's resolver gives for ``host`` (what the HTTP client
    will connect to); empty when it gives none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def _own_ip(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, trust_private: bool) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_unspecified or addr.is_multicast:
        return False
    if addr.is_loopback:
        return True
    return trust_private and (
        addr.is_private
        or addr.is_link_local
        or (isinstance(addr, ipaddress.IPv4Address) and addr in _SHARED)
    )


def _reserved(name: str) -> bool:
    return name in _RESERVED_NAMES or name.rsplit(".", 1)[-1] in _RESERVED_TLDS or any(
        name.endswith("." + r) for r in _RESERVED_NAMES)


def is_own_address(
    base_url: str,
    own_hosts: tuple[str, ...] = (),
    *,
    trust_private: bool = True,
    resolve: Resolver | None = None,
) -> bool:
    """Whether requests to ``base_url`` stay on the team's own machines (see the module
    docstring). Anything unreadable is not."""
    try:
        host = check_base_url(base_url)
    except EndpointAddressError:
        return False
    if not isinstance(host, str):
        return _own_ip(host, trust_private)
    listed = {h.strip().lower().rstrip(".") for h in own_hosts if h.strip()}
    if host in listed:
        return True
    if _reserved(host):
        return False
    found = (resolve or system_resolver)(host)
    addresses = []
    for text in found:
        try:
            # A zone ("fe80::1%eth0") belongs to the address the resolver itself returned.
            addresses.append(ipaddress.ip_address(str(text)))
        except ValueError:
            return False
    return bool(addresses) and all(_own_ip(a, trust_private) for a in addresses)


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
    trust_private: bool = True
    # Tests inject a resolver; None asks the operating system's (``system_resolver``).
    resolve: Resolver | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.base_url.strip():
            check_base_url(self.base_url)  # a host that is not plainly one is refused here
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"unknown response format {self.response_format!r}; choose one of "
                f"{', '.join(RESPONSE_FORMATS)}"
            )

    @property
    def own_machine(self) -> bool:
        return is_own_address(self.base_url, self.own_hosts,
                              trust_private=self.trust_private, resolve=self.resolve)

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
            trust_private=settings.openai_trust_private,
        )
