"""A slave's copy of its master's consumer offsets: the master's table wins, except for
progress committed on the slave while the master was away, which is kept and handed back."""

from __future__ import annotations

from ariane.broker.slave_sync import merge_offsets


def test_master_offsets_replace_the_slaves() -> None:
    local = {"T@g": {0: 5, 1: 7}, "U@g": {0: 1}}
    master = {"T@g": {0: 9}}
    table, push = merge_offsets(local, master, {})
    assert table == {"T@g": {0: 9}, "U@g": {0: 1}}  # whole key replaced, others kept
    assert push == {}
    assert local == {"T@g": {0: 5, 1: 7}, "U@g": {0: 1}}  # inputs untouched


def test_progress_made_on_the_slave_never_goes_backwards() -> None:
    local = {"T@g": {0: 120, 1: 40}}
    master = {"T@g": {0: 100, 1: 50}}
    committed_here = {"T@g": {0: 120, 1: 40}}
    table, push = merge_offsets(local, master, committed_here)
    assert table == {"T@g": {0: 120, 1: 50}}
    assert push == {"T@g": {0: 120}}


def test_keys_the_master_does_not_know_are_handed_back() -> None:
    table, push = merge_offsets({"N@g": {2: 8}}, {}, {"N@g": {2: 8}})
    assert table == {"N@g": {2: 8}}
    assert push == {"N@g": {2: 8}}
