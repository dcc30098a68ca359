"""Topic, subscription-group and consumer-offset tables and their files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ariane.broker.config import BrokerConfig
from ariane.broker.consumer_offset import ConsumerOffsetManager
from ariane.broker.metadata import MetadataFile
from ariane.broker.subscription_group import SubscriptionGroupManager
from ariane.broker.topic_config import TopicConfigManager
from ariane.common.clock import ManualClock
from ariane.errors import ConfigError
from ariane.remoting.protocol.bodies import TopicConfig


def topics(tmp_path: Path, **config: object) -> TopicConfigManager:
    cfg = BrokerConfig(broker_name="b1", broker_cluster_name="C1", **config)  # type: ignore[arg-type]
    return TopicConfigManager(cfg, str(tmp_path / "topics.json"), ManualClock())


def test_system_topics_like_rocketmq(tmp_path: Path) -> None:
    t = topics(tmp_path)
    assert t.get("TBW102") == TopicConfig("TBW102", 8, 8, 7)
    assert t.get("C1") is not None
    assert t.get("C1").perm == 7
    assert t.get("b1") == TopicConfig("b1", 1, 1, 7)
    for name in ("SELF_TEST_TOPIC", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX",
                 "RMQ_SYS_TRANS_HALF_TOPIC", "C1_REPLY_TOPIC"):  # fmt: skip
        assert name in t.system_topics
    off = topics(tmp_path, auto_create_topic_enable=False, cluster_topic_enable=False)
    assert off.get("TBW102") is None
    assert off.get("C1").perm == 1  # type: ignore[union-attr]


def test_auto_creation_rules(tmp_path: Path) -> None:
    t = topics(tmp_path)
    changes: list[int] = []
    t.on_change = lambda: changes.append(t.data_version.counter)
    tc = t.create_in_send("New", "TBW102", "client", 16, 0)
    assert tc == TopicConfig("New", 8, 8, 6)  # min(asked, template), inherit bit dropped
    assert changes == [1]
    assert t.create_in_send("New", "TBW102", "client", 2, 0) is tc
    assert t.create_in_send("X", "SELF_TEST_TOPIC", "client", 4, 0) is None  # no inherit
    assert t.create_in_send("X", "Missing", "client", 4, 0) is None
    retry = t.create_in_send_back("%RETRY%G", 1, 6)
    assert (retry.read_queue_nums, retry.perm) == (1, 6)
    assert changes == [1, 2]


def test_topics_persist_and_reload(tmp_path: Path) -> None:
    t = topics(tmp_path)
    t.put(TopicConfig("Kept", 3, 3, 6, attributes={"message.type": "FIFO"}))
    t.file.write_now()
    raw = json.loads((tmp_path / "topics.json").read_bytes())
    assert raw["topicConfigTable"]["Kept"]["attributes"] == {"message.type": "FIFO"}
    again = topics(tmp_path)
    again.load()
    assert again.get("Kept") == t.get("Kept")
    assert again.data_version == t.data_version
    assert not list(tmp_path.glob(".tmp-*")), "no temp file left behind"


def test_corrupt_file_stops_loading_and_bak_is_used_when_empty(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text("{oops")
    with pytest.raises(ConfigError, match=r"topics\.json"):
        topics(tmp_path).load()
    (tmp_path / "topics.json").write_text("")
    good = topics(tmp_path / "other")
    good.put(TopicConfig("FromBak", 1, 1, 6))
    (tmp_path / "topics.json.bak").write_bytes(good.encode())
    t = topics(tmp_path)
    t.load()
    assert t.get("FromBak") is not None


def test_order_topics_from_the_name_server(tmp_path: Path) -> None:
    t = topics(tmp_path)
    t.put(TopicConfig("O", 4, 4, 6))
    before = t.data_version.counter
    t.update_order_topics({"O": "b1:4", "Unknown": "b1:4"})
    assert t.get("O").order  # type: ignore[union-attr]
    assert t.data_version.counter == before + 1
    t.update_order_topics({"O": "b1:4"})
    assert t.data_version.counter == before + 1


def test_subscription_groups(tmp_path: Path) -> None:
    g = SubscriptionGroupManager(str(tmp_path / "subscriptionGroup.json"), ManualClock())
    assert g.find("TOOLS_CONSUMER") is not None
    assert g.find("New") is not None
    assert g.find("Other", create=False) is None
    g.auto_create = False
    assert g.find("Other") is None
    g.table["New"].retry_max_times = 2
    g.file.write_now()
    again = SubscriptionGroupManager(str(tmp_path / "subscriptionGroup.json"), ManualClock())
    again.load()
    assert again.table["New"].retry_max_times == 2
    assert again.delete("New")
    assert not again.delete("New")


def test_consumer_offsets(tmp_path: Path) -> None:
    o = ConsumerOffsetManager(str(tmp_path / "consumerOffset.json"), ManualClock())
    assert o.query("G", "T", 0) == -1
    o.commit("G", "T", 0, 5)
    o.commit("G", "T", 1, 7)
    o.commit("G2", "T", 0, 1)
    o.commit("G", "U", 0, 3)
    assert o.dirty
    assert o.topics_of_group("G") == {"T", "U"}
    assert o.groups_of_topic("T") == {"G", "G2"}
    o.persist_if_dirty()  # no running loop: written at once
    assert not o.dirty
    again = ConsumerOffsetManager(str(tmp_path / "consumerOffset.json"), ManualClock())
    again.load()
    assert again.query_all("G", "T") == {0: 5, 1: 7}
    again.clone("G", "G3", "T")
    assert again.query("G3", "T", 1) == 7
    again.remove_group("G")
    assert again.topics_of_group("G") == set()
    again.remove_topic("T")
    assert again.offset_table == {}
    again.assign_reset("G", "T", 0, 2)
    assert again.query("G", "T", 0) == 2
    assert again.take_reset("G", "T", 0) == 2
    assert again.take_reset("G", "T", 0) is None


def test_metadata_file_reports_write_errors(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("x")
    f = MetadataFile(str(blocked / "sub" / "a.json"), lambda: b"{}")
    f.persist_soon()
    assert isinstance(f.last_error, OSError)


def test_trace_topic_only_when_enabled(tmp_path: Path) -> None:
    assert topics(tmp_path).get("RMQ_SYS_TRACE_TOPIC") is None
    on = topics(tmp_path, trace_topic_enable=True)
    assert on.get("RMQ_SYS_TRACE_TOPIC") == TopicConfig("RMQ_SYS_TRACE_TOPIC", 1, 1, 6)
    assert "RMQ_SYS_TRACE_TOPIC" in on.system_topics
    named = topics(tmp_path, trace_topic_enable=True, msg_trace_topic_name="MyTrace")
    assert named.get("MyTrace") == TopicConfig("MyTrace", 1, 1, 6)
    assert named.get("RMQ_SYS_TRACE_TOPIC") is None
