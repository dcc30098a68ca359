"""Option parsing, offset JSON, partition planning and id derivation (no Spark, no sockets)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.errors import InvalidArgumentError
from ariane.spark.ids import MessageIdSequence, message_id
from ariane.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    PropertiesMode,
    SinkOptions,
    SourceOptions,
    Subscription,
    offsets_from_json,
    offsets_to_json,
)
from ariane.spark.planning import QueueRange, plan_ranges, rate_limit, split_ranges

BASE = {"nameserver": "127.0.0.1:9876", "topic": "T"}


def test_source_defaults_and_case_insensitivity() -> None:
    opts = SourceOptions.parse({"NameServer": "h:1", "TOPIC": " A, B ,A"})
    assert opts.topics == ("A", "B")
    assert opts.starting is None
    assert opts.ending == OffsetSpec(LATEST)
    assert opts.fail_on_data_loss is True
    assert opts.properties is PropertiesMode.USER
    assert opts.subscription == Subscription("*", "TAG")
    assert opts.max_offsets_per_trigger is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "T"}, "nameserver"),
        ({"nameserver": "h:1"}, "exactly one"),
        ({**BASE, "assign": '{"T": [0]}'}, "exactly one"),
        ({**BASE, "startingOffsets": "soon"}, "startingOffsets"),
        ({**BASE, "endingOffsets": "earliest"}, "earliest"),
        ({**BASE, "endingOffsets": '{"T": {"b": {"0": -2}}}'}, "earliest"),
        ({**BASE, "startingOffsets": '{"T": {"b": {"x": 1}}}'}, "not an integer"),
        ({**BASE, "startingOffsets": '{"T": {"b": {"0": -3}}}'}, ">= -2"),
        ({**BASE, "startingOffsets": "{not json"}, "JSON"),
        ({**BASE, "failOnDataLoss": "maybe"}, "true or false"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, "at least 1"),
        ({**BASE, "minPartitions": "x"}, "integer"),
        ({**BASE, "subExpression": "A", "filter": "a > 1"}, "either"),
        ({**BASE, "startingTimestamp": "yesterday"}, "ISO-8601"),
        ({**BASE, "startingTimestamp": "20", "endingTimestamp": "10"}, "before"),
        ({**BASE, "includeProperties": "some"}, "includeProperties"),
        ({"nameserver": "h:1", "topic": "bad topic!"}, "illegal"),
        ({"nameserver": "h:1", "assign": '{"T": "0"}'}, "list or object"),
    ],
)
def test_bad_source_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        SourceOptions.parse(options)


def test_assign_timestamps_and_filters() -> None:
    opts = SourceOptions.parse(
        {
            "nameserver": "h:1",
            "assign": '{"T": {"b1": [1, 0]}, "U": [2]}',
            "startingTimestamp": "2024-01-01T00:00:00Z",
            "endingTimestamp": "1704067300000",
            "filter": "a > 1",
            "includeProperties": "all",
        }
    )
    assert opts.all_topics == ("T", "U")
    assert opts.selects(("T", "b1", 0))
    assert not opts.selects(("T", "b2", 0))
    assert opts.selects(("U", "any", 2))
    assert not opts.selects(("U", "any", 1))
    assert opts.starting_timestamp_ms == 1704067200000
    assert opts.ending_timestamp_ms == 1704067300000
    assert opts.subscription == Subscription("a > 1", "SQL92")
    assert opts.subscription.tags is None
    assert opts.properties is PropertiesMode.ALL
    assert Subscription.parse("A || B ", None).tags == frozenset({"A", "B"})


def test_offset_spec_resolution() -> None:
    spec = OffsetSpec.parse('{"T": {"b": {"0": 5, "1": -1, "2": -2}}}', "startingOffsets")
    assert spec.resolve(("T", "b", 0), 3, 9) == 5
    assert spec.resolve(("T", "b", 1), 3, 9) == 9
    assert spec.resolve(("T", "b", 2), 3, 9) == 3
    assert spec.resolve(("T", "b", 7), 3, 9) == 3  # missing queues: earliest
    assert OffsetSpec.parse("LATEST", "x").resolve(("T", "b", 0), 3, 9) == 9
    assert OffsetSpec.parse("earliest", "x").default == EARLIEST


offset_maps = st.dictionaries(
    st.tuples(
        st.sampled_from(["T", "U%RETRY"]), st.sampled_from(["b1", "b-2"]), st.integers(0, 64)
    ),
    st.integers(-2, 2**62),
    max_size=20,
)


@given(offset_maps)
def test_offsets_json_round_trips_stably(offsets: dict[tuple[str, str, int], int]) -> None:
    text = offsets_to_json(offsets)
    assert offsets_from_json(text) == offsets
    assert offsets_to_json(dict(reversed(list(offsets.items())))) == text


def test_sink_options() -> None:
    opts = SinkOptions.parse({"nameserver": "h:1", "topic": "T", "batchRows": "10"})
    assert (opts.topic, opts.batch_rows, opts.id_namespace) == ("T", 10, None)
    defaults = SinkOptions.parse({"nameserver": "h:1"})
    assert (defaults.batch_rows, defaults.max_in_flight, defaults.idempotent) == (1024, 16, True)
    with pytest.raises(InvalidArgumentError, match="one topic"):
        SinkOptions.parse({"nameserver": "h:1", "topic": "A,B"})
    with pytest.raises(InvalidArgumentError, match="nameserver"):
        SinkOptions.parse({"topic": "T"})


def test_plan_and_split() -> None:
    start = {("T", "b", 0): 0, ("T", "b", 1): 5, ("T", "b", 2): 7}
    end = {("T", "b", 0): 25, ("T", "b", 1): 5, ("T", "b", 2): 8, ("T", "b", 3): 4}
    ranges = plan_ranges(start, end)
    assert ranges == [QueueRange("T", "b", 0, 0, 25), QueueRange("T", "b", 2, 7, 8)]
    split = split_ranges(ranges, 6)
    assert len(split) == 6
    assert sum(r.size for r in split) == 26
    assert split[-1] == QueueRange("T", "b", 2, 7, 8)
    pieces = [r for r in split if r.queue_id == 0]
    assert pieces[0].start == 0
    assert pieces[-1].end == 25
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges


@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    st.integers(1, 64),
)
def test_split_covers_exactly(sizes: list[int], parts: int) -> None:
    ranges = [QueueRange("T", "b", i, 10, 10 + s) for i, s in enumerate(sizes) if s]
    split = split_ranges(ranges, parts)
    covered = sorted((r.queue_id, o) for r in split for o in range(r.start, r.end))
    assert covered == sorted((r.queue_id, o) for r in ranges for o in range(r.start, r.end))
    assert all(r.size > 0 for r in split)
    if sum(sizes) >= parts:
        assert len(split) >= min(parts, sum(sizes))


@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 1000)), min_size=1, max_size=8),
    st.integers(1, 500),
)
def test_rate_limit_is_exact_and_advances(pairs: list[tuple[int, int]], limit: int) -> None:
    start = {("T", "b", i): s for i, (s, _) in enumerate(pairs)}
    end = {("T", "b", i): s + n for i, (s, n) in enumerate(pairs)}
    capped = rate_limit(start, end, limit)
    total = sum(end[k] - start[k] for k in end)
    taken = sum(capped[k] - start[k] for k in capped)
    assert taken == min(total, limit)
    assert all(start[k] <= capped[k] <= end[k] for k in end)


def test_ids_are_deterministic_and_distinct() -> None:
    seq = MessageIdSequence("q", 3, 1)
    ids = [seq.next() for _ in range(1000)]
    assert ids[7] == message_id("q", 3, 1, 7)
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    assert message_id("q", 3, 1, 7) != message_id("q", 3, 2, 7) != message_id("q", 4, 1, 7)
    assert message_id("q", 1, 23, 4) != message_id("q", 12, 3, 4)
