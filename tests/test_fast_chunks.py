"""The fast engine's long sequences (semantics/fast/chunks.py) read and update
as the tuples the definition keeps: after any series of appends, sorted
insertions and removals, removals by key, slices and concatenations (with
tuples on either side), the items are the tuple's, in its order, and every
index and slice reads the same. Small chunks (SIZE patched to 4) so that a
few dozen items make many chunks."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semantics.fast import chunks
from semantics.fast.chunks import Chunks
from semantics.smallstep.configuration import insert_event, remove_event

OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 30)),
    st.tuples(st.just("remove"), st.integers(0, 200)),
    st.tuples(st.just("append"), st.integers(0, 30)),
    st.tuples(st.just("slice"), st.tuples(st.integers(-5, 60), st.integers(-5, 60))),
    st.tuples(st.just("add"), st.integers(0, 5)),
    st.tuples(st.just("radd"), st.integers(0, 5)),
    st.tuples(st.just("definition"), st.integers(0, 30)),
), max_size=80)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(chunks, "SIZE", 4)


def assert_reads_as(seq, model: tuple) -> None:
    assert len(seq) == len(model) and bool(seq) == bool(model)
    assert tuple(seq) == model and seq == model
    for i in range(-len(model), len(model)):
        assert seq[i] == model[i]
    for a in range(-2, len(model) + 2, 3):
        for b in range(-2, len(model) + 2, 2):
            assert tuple(seq[a:b]) == model[a:b]


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_sorted_events_in_chunks_are_the_tuple(operations):
    """Events (time, sequence number, kind, a, b) kept sorted: the fast updates, and the
    definition's own insert_event and remove_event working on the chunks, give the tuple's items."""
    seq, model, sequence = Chunks.of(()), (), 0
    for operation, value in operations:
        if operation in ("insert", "definition", "append"):
            key = (float(value), sequence)
            sequence += 1
            event = (key[0], key[1], "e", value, 0)
            seq = seq.insert_sorted(event) if operation != "definition" else insert_event(seq, key, "e", value, 0)
            model = insert_event(model, key, "e", value, 0)
        elif operation == "remove" and model:
            key = model[value % len(model)][:2]
            seq = seq.remove_sorted(key) if value % 2 else remove_event(seq, key)
            model = remove_event(model, key)
        elif operation == "slice":
            a, b = value
            seq, model = seq[a:] if b < 0 else seq[a:b], model[a:] if b < 0 else model[a:b]
            seq = seq if isinstance(seq, Chunks) else Chunks.of(seq)
        assert_reads_as(seq, model)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_a_line_in_chunks_is_the_tuple(operations):
    """A line of jobs in id order: appends, removal by id, concatenation with tuples on either side."""
    seq, model, next_id = Chunks.of(()), (), 0
    for operation, value in operations:
        if operation == "append":
            seq, model = seq.append((next_id, value)), model + ((next_id, value),)
            next_id += 1
        elif operation == "remove" and model:
            job = model[value % len(model)]
            if value % 3 == 0:
                item, seq = seq.pop_key(job[0], lambda j: j[0])
            else:
                k, item = seq.find_key(job[0], lambda j: j[0])
                assert model[k] == item
                seq = seq.delete(k)
            assert item == job
            model = tuple(j for j in model if j != job)
        elif operation == "insert" and model:
            k = value % len(model)
            seq, model = seq.replace(k, (model[k][0], -1)), model[:k] + ((model[k][0], -1),) + model[k + 1:]
        elif operation == "add":
            extra = tuple((next_id + k, 0) for k in range(value))
            next_id += value
            seq, model = seq + extra, model + extra
        elif operation == "radd" and (not model or model[0][0] > value):
            front = tuple((-(k + 1) * 1000 - next_id, 0) for k in reversed(range(value)))
            next_id += value
            seq, model = front + seq, front + model
        elif operation == "slice":
            a, b = value
            seq, model = seq[a:b], model[a:b]
            seq = seq if isinstance(seq, Chunks) else Chunks.of(seq)
        assert_reads_as(seq, model)
        probe = next_id // 2  # a binary search by id reads the chunks as the tuple
        assert bisect.bisect_left(seq, probe, key=lambda j: j[0]) == bisect.bisect_left(model, probe, key=lambda j: j[0])


def test_the_fast_forms_keep_a_short_line_a_tuple_and_a_long_one_in_chunks():
    line = ()
    for k in range(chunks.LONG + 3):
        line = chunks.appended(line, k)
        assert type(line) is (tuple if k + 1 < chunks.LONG else Chunks)
    assert tuple(line) == tuple(range(chunks.LONG + 3))
