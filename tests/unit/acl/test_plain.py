"""plain_acl.yml documents: every key of book section 17.3, errors, merge and edits."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.acl.permission import DENY, PUB, SUB
from ariane.acl.plain import (
    AclRules,
    PlainAccessConfig,
    delete_account,
    dump_document,
    parse_document,
    set_global_white,
    update_account,
)
from ariane.errors import AclError

BOOK = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - timestamp: 1700000000000
    counter: 7
"""


def test_the_book_sample_loads_with_every_key() -> None:
    doc = parse_document(BOOK, "plain_acl.yml")
    assert [r.text for r in doc.global_white] == ["10.10.103.*", "192.168.0.*"]
    first, second = doc.accounts
    assert first.access_key == "RocketMQ"
    assert first.secret_key == "12345678"  # YAML gives an int; kept as text
    assert first.white_rule.kind == "blank"
    assert not first.admin
    assert first.default_topic_perm == DENY
    assert first.default_group_perm == SUB
    assert first.perms == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    assert second.admin
    assert second.white_rule.matches("192.168.1.77")
    assert second.default_topic_perm == DENY  # absent: DENY
    assert doc.data_version.counter == 7
    assert doc.data_version.timestamp == 1700000000000
    assert doc.warnings == ()


def test_empty_file_is_an_empty_document() -> None:
    doc = parse_document("", "x.yml")
    assert doc.accounts == ()
    assert doc.global_white == ()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("accounts: [", "not valid YAML"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("accounts: 5", "'accounts' must be a list"),
        ("accounts: [5]", "accounts[0] must be a mapping"),
        (
            "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
            "accessKey must be longer than 6",
        ),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 123456\n",
            "secretKey must be longer than 6",
        ),
        ("accounts:\n  - secretKey: 12345678\n", "accessKey must be longer than 6"),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: 12345678, topicPerms: [topicA]}\n",
            "parse resource permission failed for topic",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: 12345678, groupPerms: ['a=b=c']}\n",
            "for group",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: 12345678, whiteRemoteAddress: '300.1.1.1'}\n",
            "300.1.1.1",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: 12345678, admin: maybe}\n",
            "admin must be true or false",
        ),
        ("accounts:\n  - {accessKey: [a], secretKey: 12345678}\n", "accessKey must be a string"),
        ("globalWhiteRemoteAddresses: [1.2.3.999]\n", "1.2.3.999"),
        ("globalWhiteRemoteAddresses: {a: 1}\n", "must be a list"),
        ("dataVersion: [{timestamp: x, counter: 1}]\n", "integers"),
    ],
)
def test_malformed_documents_name_file_and_problem(text: str, needle: str) -> None:
    with pytest.raises(AclError) as err:
        parse_document(text, "conf/acl/bad.yml")
    assert "conf/acl/bad.yml" in str(err.value)
    assert needle in str(err.value)


def test_unknown_words_are_deny_with_warnings() -> None:
    doc = parse_document(
        "accounts:\n  - {accessKey: longenough, secretKey: 12345678, defaultTopicPerm: ALL,"
        " topicPerms: [t=PUBB], colour: red}\nextra: 1\n",
        "p.yml",
    )
    account = doc.accounts[0]
    assert account.default_topic_perm == DENY
    assert account.perms == {"t": DENY}
    text = "\n".join(doc.warnings)
    assert "'ALL'" in text
    assert "'PUBB'" in text
    assert "'colour'" in text
    assert "'extra'" in text


def test_merge_keeps_the_first_definition_of_a_key() -> None:
    one = parse_document("accounts:\n  - {accessKey: samekey1, secretKey: secret-one}\n", "a.yml")
    two = parse_document(
        "globalWhiteRemoteAddresses: ['10.*']\n"
        "accounts:\n  - {accessKey: samekey1, secretKey: secret-two}\n"
        "  - {accessKey: otherkey, secretKey: secret-three}\n",
        "b.yml",
    )
    rules = AclRules.merge([one, two])
    assert rules.accounts["samekey1"].secret_key == "secret-one"
    assert rules.accounts["otherkey"].source == "b.yml"
    assert [r.text for r in rules.global_white] == ["10.*"]
    assert any("already defined in a.yml" in w for w in rules.warnings)
    white, configs = rules.all_configs()
    assert white == ["10.*"]
    assert [c.access_key for c in configs] == ["samekey1", "otherkey"]


def test_update_creates_then_updates_an_account_and_bumps_the_version() -> None:
    doc = parse_document(BOOK, "p.yml")
    created = update_account(
        doc.mapping,
        PlainAccessConfig(
            "newaccount", "newsecret1", "10.0.0.*", False, "SUB", "SUB", ("t1=PUB",), ("g1=SUB",)
        ),
        "p.yml",
        1800000000000,
    )
    reloaded = parse_document(dump_document(created), "p.yml")
    assert reloaded.data_version.counter == 8
    assert reloaded.data_version.timestamp == 1800000000000
    account = {a.access_key: a for a in reloaded.accounts}["newaccount"]
    assert account.perms == {"t1": PUB, "%RETRY%g1": SUB}
    assert account.white_rule.matches("10.0.0.9")
    updated = update_account(
        reloaded.mapping,
        PlainAccessConfig("newaccount", "othersecret", admin=True),
        "p.yml",
        1800000000001,
    )
    again = {a.access_key: a for a in parse_document(dump_document(updated), "p.yml").accounts}
    assert again["newaccount"].secret_key == "othersecret"
    assert again["newaccount"].admin
    assert again["newaccount"].perms == {"t1": PUB, "%RETRY%g1": SUB}  # kept
    assert list(again) == ["RocketMQ", "rocketmq2", "newaccount"]


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        (PlainAccessConfig("short", "12345678"), "accessKey must be longer"),
        (PlainAccessConfig("longenough", "short"), "secretKey must be longer"),
        (PlainAccessConfig("longenough", "12345678", topic_perms=("a",)), "topicName=PERM"),
        (PlainAccessConfig("longenough", "12345678", group_perms=("a=ALL",)), "permission must be"),
        (PlainAccessConfig("longenough", "12345678", default_topic_perm="ALL"), "defaultTopicPerm"),
        (PlainAccessConfig("longenough", "12345678", white_remote_address="1.2.3"), "1.2.3"),
    ],
)
def test_update_refuses_what_would_not_load(config: PlainAccessConfig, needle: str) -> None:
    with pytest.raises(AclError, match=needle.replace("|", r"\|")):
        update_account({}, config, "p.yml", 1)


def test_delete_and_global_white_edits() -> None:
    doc = parse_document(BOOK, "p.yml")
    assert delete_account(doc.mapping, "nosuchkey", "p.yml", 5) is None
    deleted = delete_account(doc.mapping, "RocketMQ", "p.yml", 5)
    assert deleted is not None
    after = parse_document(dump_document(deleted), "p.yml")
    assert [a.access_key for a in after.accounts] == ["rocketmq2"]
    assert after.data_version.counter == 8
    white = set_global_white(after.mapping, ["1.2.3.*", " ", "fe80::*"], "p.yml", 6)
    final = parse_document(dump_document(white), "p.yml")
    assert [r.text for r in final.global_white] == ["1.2.3.*", "fe80::*"]
    assert final.data_version.counter == 9
    with pytest.raises(AclError):
        set_global_white(after.mapping, ["1.2.3.400"], "p.yml", 7)


yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.floats(allow_nan=False)
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
account_like = st.dictionaries(
    st.sampled_from(
        [
            "accessKey",
            "secretKey",
            "whiteRemoteAddress",
            "admin",
            "defaultTopicPerm",
            "defaultGroupPerm",
            "topicPerms",
            "groupPerms",
            "other",
        ]
    ),
    yaml_values,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["globalWhiteRemoteAddresses", "accounts", "dataVersion", "x"]),
        st.one_of(yaml_values, st.lists(account_like, max_size=3)),
    )
)
def test_any_mapping_loads_or_raises_acl_error(mapping: dict[str, object]) -> None:
    import yaml

    text = yaml.safe_dump(mapping)
    try:
        doc = parse_document(text, "fuzz.yml")
    except AclError as exc:
        message = str(exc)
    else:
        AclRules.merge([doc])
        return
    assert "fuzz.yml" in message


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_text_loads_or_raises_acl_error(text: str) -> None:
    try:
        parse_document(text, "fuzz.yml")
    except AclError:
        pass
