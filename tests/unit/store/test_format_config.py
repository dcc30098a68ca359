import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common.message import HostPort, MessageExt
from ariane.common.record import encode_record
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.errors import ConfigError
from ariane.store.config import FlushDiskType, StoreConfig, parse_delay_levels
from ariane.store.format import (
    Corrupt,
    Decoded,
    EndOfSegment,
    check_record,
    delivery_timestamp,
    file_name,
    parse_file_name,
)


def test_file_names() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1073741824) == "00000000001073741824"
    assert parse_file_name("00000000001073741824") == 1073741824
    assert parse_file_name("00000000001073741824.tr0") is None
    assert parse_file_name("abc") is None


def test_check_record_dispatch_fields() -> None:
    m = MessageExt(
        topic="T",
        body=b"b",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U"},
        queue_id=2,
        queue_offset=5,
        commit_log_offset=100,
        store_timestamp_ms=1234,
        store_host=HostPort(bytes(16), 1),
    )
    data = encode_record(m)
    res = check_record(data, 0, len(data), check_crc=True, want_dispatch=True)
    assert isinstance(res, Decoded)
    assert res.dispatch is not None
    assert res.dispatch[:10] == ("T", 2, 100, len(data), 2598919, 1234, 5, "k1 k2", "U", 0x20)


def test_schedule_topic_tags_code_is_delivery_time() -> None:
    levels = parse_delay_levels("1s 5s 10s")
    assert levels == (1000, 5000, 10000)
    assert delivery_timestamp(levels, 2, 1000) == 6000
    assert delivery_timestamp(levels, 99, 1000) == 11000
    m = MessageExt(topic=SCHEDULE_TOPIC, body=b"", properties={"DELAY": "2"}, store_timestamp_ms=10)
    data = encode_record(m)
    res = check_record(data, 0, len(data), check_crc=True, want_dispatch=True, levels_ms=levels)
    assert isinstance(res, Decoded)
    assert res.dispatch is not None
    assert res.dispatch[4] == 5010


def test_blank_and_zero() -> None:
    blank = bytes.fromhex("00000020CBD43194") + bytes(24)
    assert check_record(blank, 0, 32, check_crc=True, want_dispatch=False) == EndOfSegment(32)
    assert isinstance(check_record(bytes(64), 0, 64, check_crc=True, want_dispatch=False), Corrupt)


@settings(max_examples=300)
@given(st.binary(max_size=300), st.integers(-5, 400), st.integers(-5, 400), st.booleans())
def test_check_record_never_raises(data: bytes, pos: int, limit: int, crc: bool) -> None:
    res = check_record(data, pos, limit, check_crc=crc, want_dispatch=True)
    assert isinstance(res, Decoded | EndOfSegment | Corrupt)


def test_config_defaults_and_validation(tmp_path: object) -> None:
    cfg = StoreConfig(store_path_root_dir="/x")
    assert cfg.mapped_file_size_commit_log == 1 << 30
    assert cfg.mapped_file_size_consume_queue == 6_000_000
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert cfg.index_file_size == 420_000_040
    assert cfg.disk_max_used_space_ratio_clamped == 0.75
    assert (
        StoreConfig(
            store_path_root_dir="/x", mapped_file_size_consume_queue=1001
        ).mapped_file_size_consume_queue
        == 1020
    )
    with pytest.raises(ConfigError, match="mappedFileSizeCommitLog"):
        StoreConfig(store_path_root_dir="/x", mapped_file_size_commit_log=1000)
    with pytest.raises(ConfigError, match="deleteWhen"):
        StoreConfig(store_path_root_dir="/x", delete_when="25")
    with pytest.raises(ConfigError, match="messageDelayLevel"):
        StoreConfig(store_path_root_dir="/x", message_delay_level="1x")
    with pytest.raises(ConfigError, match="syncFlushTimeout"):
        StoreConfig(store_path_root_dir="/x", sync_flush_timeout_ms=0)
    # 0 is legal (RocketMQ does not check it): every read short of the newest message is cold
    assert StoreConfig(store_path_root_dir="/x", access_message_in_memory_max_ratio=0)
    with pytest.raises(ConfigError, match="accessMessageInMemoryMaxRatio"):
        StoreConfig(store_path_root_dir="/x", access_message_in_memory_max_ratio=-1)
    with pytest.raises(ConfigError, match="accessMessageInMemoryMaxRatio"):
        StoreConfig(store_path_root_dir="/x", access_message_in_memory_max_ratio=101)
