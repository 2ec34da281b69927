"""Whether an OpenAI-compatible address is one of the team's own machines, judged as the network
judges it: hostile URLs are refused or sent to the acknowledgement, never called "own". Names
are resolved by an injected resolver; no test looks up a real name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from faillab_core.settings import Settings
from llm.endpoints import EndpointAddressError, OpenAIEndpoint, check_base_url, is_own_address
from llm.errors import ConsentRequiredError
from llm.privacy import openai_destination
from opinions.prelabel.consent import needs_consent, require_consent
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.run_errors import PrelabelServiceError

# What the injected resolver answers; a name missing here does not resolve.
DNS: Mapping[str, Sequence[str]] = {
    "localhost": ["127.0.0.1", "::1"],
    "gpu.localhost": ["127.0.0.1"],
    "llm.lab": ["10.0.0.7"],  # an internal name on the team's network
    "vpn.lab": ["100.64.3.4", "fd00::5"],
    "split.lab": ["10.0.0.8", "20.1.2.3"],  # one private, one public address
    "rebound.lab": ["20.1.2.3"],
    "mapped.lab": ["::ffff:192.168.0.9"],
    "api.vendor": ["20.9.8.7"],
}


def fake_resolve(host: str) -> list[str]:
    asked.append(host)
    return list(DNS.get(host, []))


asked: list[str] = []


@pytest.fixture(autouse=True)
def _clear_asked() -> None:
    asked.clear()


# (url, own with private addresses trusted, own with them not trusted)
JUDGED = [
    ("http://127.0.0.1:8000/v1", True, True),
    ("http://[::1]:8000/v1", True, True),
    ("http://[::ffff:127.0.0.1]/v1", True, True),  # IPv4-mapped loopback
    ("http://10.1.2.3/v1", True, False),
    ("http://[::ffff:10.1.2.3]/v1", True, False),  # IPv4-mapped private
    ("http://[::ffff:8.8.8.8]/v1", False, False),  # IPv4-mapped public
    ("http://[fe80::1%25eth0]:8000/v1", True, False),  # RFC 6874 zone, inside brackets
    ("http://[fe80::1%eth0]/v1", True, False),
    ("http://localhost:8000/v1", True, True),
    ("http://LOCALHOST./v1", True, True),  # a trailing dot is the same name
    ("http://gpu.localhost/v1", True, True),
    ("http://llm.lab:8000/v1", True, False),  # resolves to a private address only
    ("http://vpn.lab/v1", True, False),
    ("http://mapped.lab/v1", True, False),
    ("http://split.lab/v1", False, False),  # one public address is enough to be public
    ("http://rebound.lab/v1", False, False),
    ("http://api.vendor/v1", False, False),
    ("http://nxdomain.lab/v1", False, False),  # does not resolve
    ("http://0.0.0.0/v1", False, False),
    ("http://[::]/v1", False, False),
    ("http://224.0.0.1/v1", False, False),
    ("http://xn--e1afmkfd.xn--p1ai/v1", False, False),  # an IDN in its ASCII form: a name
]


@pytest.mark.parametrize(("url", "trusted", "untrusted"), JUDGED)
def test_addresses_are_judged_as_the_network_judges_them(
        url: str, trusted: bool, untrusted: bool) -> None:
    assert is_own_address(url, trust_private=True, resolve=fake_resolve) is trusted
    assert is_own_address(url, trust_private=False, resolve=fake_resolve) is untrusted


# Hosts that are not plainly one name or one address: refused with a message naming the problem.
REFUSED = [
    # the review's findings: everything after % was dropped, the request went to a public name
    ("http://10.0.0.1%2f.evil.com/v1", "percent signs"),
    ("http://192.168.1.1%25.attacker.example/v1", "percent signs"),
    ("http://127.0.0.1%00/v1", "percent signs"),
    ("http://lo%63alhost/v1", "percent signs"),
    # user info: which side of @ is the host depends on the parser
    ("http://127.0.0.1@evil.com/v1", "before '@'"),
    ("http://user:secret@127.0.0.1:8000/v1", "before '@'"),
    ("http://evil.com\\@127.0.0.1/v1", "backslashes"),
    ("http://127.0.0.1 .evil.com/v1", "spaces"),
    # IPv4 in other notations: 127.0.0.1 to inet_aton, a name to a URL parser
    ("http://2130706433/v1", "four decimal numbers"),
    ("http://0x7f000001/v1", "four decimal numbers"),
    ("http://0x7f.0.0.1/v1", "four decimal numbers"),
    ("http://0177.0.0.1/v1", "four decimal numbers"),
    ("http://127.1/v1", "four decimal numbers"),
    ("http://10.0.0.1.evil.0x1/v1", "four decimal numbers"),
    ("http://127.0.0.1./v1", "cannot end in a dot"),
    # IDN: full-width letters and digits map to ASCII under IDNA
    ("http://ｌｏｃａｌｈｏｓｔ/v1", "xn--"),
    ("http://１２７.０.０.１/v1", "xn--"),
    ("http://localhost。evil.com/v1", "xn--"),
    # not names
    ("http://a..b/v1", "not a valid host name"),
    ("http://-llm.lab/v1", "not a valid host name"),
    ("http://" + "a" * 64 + ".lab/v1", "not a valid host name"),
    ("http://[fe80::1%25eth0+x]/v1", "IPv6 zone"),
    ("http://[10.0.0.1]/v1", "cannot be in brackets"),
    ("http://[v1.fe80::1]/v1", "not an IPv6 address"),
    ("http://127.0.0.1:80x/v1", "not a URL"),
    ("ftp://127.0.0.1/v1", "http:// or https://"),
    ("127.0.0.1:8000/v1", "http:// or https://"),
    ("http:///v1", "no host"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_hostile_hosts_are_refused_with_a_reason(url: str, why: str) -> None:
    with pytest.raises(EndpointAddressError, match="server address") as refused:
        check_base_url(url)
    assert why in str(refused.value)
    # Never "own", whatever a resolver would say, and nothing is looked up.
    assert not is_own_address(url, resolve=lambda host: ["127.0.0.1"])
    with pytest.raises(ValueError, match=why.replace(".", r"\.")):
        OpenAIEndpoint(url)


def test_reserved_names_are_never_looked_up() -> None:
    for url in ("https://llm.example.com/v1", "http://x.example/v1", "http://a.test/v1",
                "http://b.invalid/v1", "http://example.org/v1"):
        assert not is_own_address(url, resolve=fake_resolve)
    assert asked == []


def test_listed_names_are_own_without_a_lookup() -> None:
    assert is_own_address("http://api.vendor./v1", ("API.vendor",), resolve=fake_resolve)
    assert asked == []


def test_the_setting_and_the_interlock_use_the_same_rule() -> None:
    def options(url: str, trust: bool) -> PrelabelOptions:
        endpoint = OpenAIEndpoint(url, trust_private=trust, resolve=fake_resolve)
        return PrelabelOptions(labeller="openai-compatible", model="m", openai=endpoint)

    assert not needs_consent(options("http://llm.lab/v1", True))
    assert needs_consent(options("http://llm.lab/v1", False))
    assert needs_consent(options("http://split.lab/v1", True))
    with pytest.raises(ConsentRequiredError, match=r"split\.lab"):
        require_consent(options("http://split.lab/v1", True), env={})
    dest = openai_destination(OpenAIEndpoint("http://127.0.0.1/v1"))
    assert dest.own_machines
    settings = Settings.from_env({"FAILLAB_OPENAI_BASE_URL": "http://10.0.0.1/v1",
                                  "FAILLAB_OPENAI_TRUST_PRIVATE": "0"})
    assert not OpenAIEndpoint.from_settings(settings).own_machine
    assert OpenAIEndpoint.from_settings(
        Settings.from_env({"FAILLAB_OPENAI_BASE_URL": "http://10.0.0.1/v1"})).own_machine


def test_a_hostile_setting_is_one_clear_error_before_anything_is_sent() -> None:
    settings = Settings.from_env({"FAILLAB_OPENAI_BASE_URL": "http://10.0.0.1%2f.evil.com/v1",
                                  "FAILLAB_OPENAI_MODEL": "m"})
    with pytest.raises(PrelabelServiceError, match="percent signs"):
        PrelabelOptions(labeller="openai-compatible").with_defaults(settings)
