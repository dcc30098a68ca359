"""IP rules (RemoteAddressStrategyFactory): every strategy, IPv6, and malformed rules."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl.address import client_ip, parse_ip_rule
from ariane.errors import AclError


@pytest.mark.parametrize("text", [None, "", "   "])
def test_blank_rule_matches_nothing(text: str | None) -> None:
    rule = parse_ip_rule(text)
    assert rule.kind == "blank"
    assert not rule.matches("127.0.0.1")
    assert not rule.matches("::1")


@pytest.mark.parametrize("text", ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"])
def test_all_rules_match_everything(text: str) -> None:
    rule = parse_ip_rule(text)
    assert rule.kind == "all"
    assert rule.matches("10.1.2.3")
    assert rule.matches("fe80::1")
    assert rule.matches("not an ip")


@pytest.mark.parametrize(
    ("rule", "inside", "outside"),
    [
        (
            "192.168.0.{100,101}",
            ["192.168.0.100", "192.168.0.101"],
            ["192.168.0.102", "192.168.1.100"],
        ),
        ("192.168.1.100,192.168.2.100", ["192.168.1.100", "192.168.2.100"], ["192.168.3.100"]),
        (
            "1050::0005:0600:300c:{326b,326c}",
            ["1050:0:0:0:5:600:300c:326b", "1050::5:600:300c:326c"],
            ["1050::5:600:300c:326d"],
        ),
        ("10.0.0.1", ["10.0.0.1", "::ffff:10.0.0.1"], ["10.0.0.2"]),
        ("::1", ["0:0:0:0:0:0:0:1", "::1"], ["::2", "127.0.0.1"]),
        ("FE80::ABCD", ["fe80::abcd", "fe80:0:0:0:0:0:0:abcd"], ["fe80::abce"]),
    ],
)
def test_address_sets(rule: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_ip_rule(rule)
    assert parsed.kind == "set"
    for ip in inside:
        assert parsed.matches(ip), ip
    for ip in outside:
        assert not parsed.matches(ip), ip


@pytest.mark.parametrize(
    ("rule", "inside", "outside"),
    [
        ("192.168.*.*", ["192.168.0.0", "192.168.255.255"], ["192.169.0.1", "10.168.1.1"]),
        ("192.168.*.", ["192.168.7.9"], ["192.167.7.9"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.254"], ["192.168.2.1"]),
        (
            "192.168.100-200.*",
            ["192.168.100.1", "192.168.200.255"],
            ["192.168.99.1", "192.168.201.0"],
        ),
        # every range segment is checked (RocketMQ 4.x would let 192.168.150.99 in)
        (
            "192.168.100-200.10-20",
            ["192.168.150.10", "192.168.100.20"],
            ["192.168.150.99", "192.168.150.9"],
        ),
        ("10.*", ["10.0.0.0", "10.255.1.2"], ["11.0.0.1"]),
        ("fe80::*", ["fe80::1", "fe80::ffff"], ["fe80::1:0", "fe81::1"]),
        ("fe80:*", ["fe80:1:2:3:4:5:6:7"], ["fe81::1"]),
        ("2001:db8:0-ff:*", ["2001:db8:ff::1", "2001:db8::9"], ["2001:db8:100::1"]),
    ],
)
def test_ranges(rule: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_ip_rule(rule)
    assert parsed.kind == "range"
    for ip in inside:
        assert parsed.matches(ip), ip
    for ip in outside:
        assert not parsed.matches(ip), ip


def test_a_range_never_matches_the_other_family() -> None:
    assert not parse_ip_rule("10.*").matches("::a00:1")
    assert not parse_ip_rule("::*").matches("10.0.0.1")


@pytest.mark.parametrize(
    "text",
    [
        "192.168.0.256",
        "hello",
        "192.168.{1,2}.3}",
        "1.2.{}",
        "1.2.3.{300}",
        "192.168.300-400.*",
        "192.168.20-10.*",
        "192.168.-5.*",
        "1.2.3.4.5.*",
        "a.b.*",
        "1::2::*",
        "fffff::*",
        "1.2.3.4,banana",
    ],
)
def test_malformed_rules_raise_naming_the_rule(text: str) -> None:
    with pytest.raises(AclError) as err:
        parse_ip_rule(text)
    assert text.split(",")[-1].strip("{}") in str(err.value) or text in str(err.value)


def test_non_string_rule_is_refused() -> None:
    with pytest.raises(AclError):
        parse_ip_rule(42)


def test_client_ip_strips_the_port() -> None:
    assert client_ip("10.0.0.1:5555") == "10.0.0.1"
    assert client_ip("::1:5555") == "::1"
    assert client_ip("[fe80::1]:99") == "fe80::1"
    assert client_ip("nohost") == "nohost"


ipv4 = st.integers(0, 2**32 - 1).map(lambda n: ipaddress.IPv4Address(n))
ipv6 = st.integers(0, 2**128 - 1).map(lambda n: ipaddress.IPv6Address(n))


@settings(max_examples=200, deadline=None)
@given(ipv4, ipv4)
def test_single_ipv4_rule_matches_only_itself(
    rule_ip: ipaddress.IPv4Address, other: ipaddress.IPv4Address
) -> None:
    rule = parse_ip_rule(str(rule_ip))
    assert rule.matches(str(rule_ip))
    assert rule.matches(f"::ffff:{rule_ip}")
    assert rule.matches(str(other)) == (other == rule_ip)


@settings(max_examples=200, deadline=None)
@given(ipv6, ipv6)
def test_single_ipv6_rule_matches_every_spelling(
    rule_ip: ipaddress.IPv6Address, other: ipaddress.IPv6Address
) -> None:
    if rule_ip.ipv4_mapped is not None:
        return
    rule = parse_ip_rule(rule_ip.exploded.upper())
    assert rule.matches(rule_ip.compressed)
    assert rule.matches(rule_ip.exploded)
    assert rule.matches(str(other)) == (other == rule_ip)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), min_size=4, max_size=4),
    ipv4,
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_range_rule_is_per_segment_interval(
    bounds: list[tuple[int, int]], ip: ipaddress.IPv4Address, star: list[bool]
) -> None:
    segs = []
    intervals = []
    for (a, b), is_star in zip(bounds, star, strict=True):
        lo, hi = min(a, b), max(a, b)
        if is_star:
            segs.append("*")
            intervals.append((0, 255))
        else:
            segs.append(f"{lo}-{hi}")
            intervals.append((lo, hi))
    rule = parse_ip_rule(".".join(segs))
    parts = [int(p) for p in str(ip).split(".")]
    expected = all(lo <= p <= hi for p, (lo, hi) in zip(parts, intervals, strict=True))
    assert rule.matches(str(ip)) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789abcdef.:*-{},ABCDEF %x", max_size=40))
def test_any_rule_text_parses_or_raises_acl_error(text: str) -> None:
    try:
        rule = parse_ip_rule(text)
    except AclError:
        return
    rule.matches("10.1.2.3")
    rule.matches("fe80::1")
