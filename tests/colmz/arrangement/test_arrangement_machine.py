"""``colmz.arrangement.machine``: the machine owns its state and its document's codec, applies
pure commands, touches no part and names the garbage; the handle checks leases and deletes."""

from __future__ import annotations

import pytest

from colmz.arrangement.errors import IdentityMismatch, SealMismatch
from colmz.arrangement.machine import STALE, Machine
from colmz.arrangement.state import ArrangementState, decode_state, encode_state
from colmz.storage import MemConsensus
from colmz.storage.base import Determinate, Indeterminate
from colmz.storage.state import StateLog


def durable(consensus: MemConsensus) -> Machine:
    log = StateLog(consensus, "arr")
    seqno, doc = log.load()
    m = Machine(log, ArrangementState(), None)
    if doc is None:
        m.commit()
    else:
        m.loaded(seqno, m.decode(seqno, doc))
    return m


def test_an_in_memory_machine_takes_no_callback_and_names_the_garbage():
    m = Machine(None, ArrangementState())
    out = m.apply(lambda s: s.update_seal(2))
    assert out.applied and out.garbage == frozenset() and out.error is None and m.state.seal == 2

    def refuse(state):
        raise SealMismatch("expected another seal")

    out = m.apply(refuse, written={"p/1"})
    assert not out.applied and out.garbage == {"p/1"} and isinstance(out.error, SealMismatch)
    with pytest.raises(SealMismatch):
        out.result()
    assert m.state.seal == 2
    # a stale command commits nothing; its written parts are garbage unless kept
    assert m.apply(lambda s: STALE, written={"p/2"}).garbage == {"p/2"}
    assert m.apply(lambda s: STALE, written={"p/2"}, keep={"p/2"}).garbage == frozenset()


def test_a_lost_compare_and_set_is_applied_again_to_the_new_head():
    consensus = MemConsensus()
    a, b = durable(consensus), durable(consensus)
    a.apply(lambda s: s.update_seal(5)).result()
    # b read the state before a's commit: its command is applied again to a's state
    seen = []

    def seal_plus_one(state):
        seen.append(state.seal)
        return state.update_seal(state.seal + 1)

    out = b.apply(seal_plus_one, written=set())
    assert out.applied and out.conflicts == 1 and seen == [0, 5]
    assert durable(consensus).state.seal == 6


def test_a_replaced_state_names_the_parts_it_dropped():
    from colmz.arrangement.meta import UnsealedBatchMeta

    m = Machine(None, ArrangementState())
    batch = UnsealedBatchMeta((0, 1), 0, 0, ("p/a",), 1, 10, ((1, 1),))
    m.apply(lambda s: s.unsealed_append(batch), written={"p/a"}).result()
    out = m.apply(lambda s: s.update_seal(1).handle_drain_response(_drained(s)).unsealed_evict()[0])
    assert out.applied and out.garbage == frozenset()  # the trace took the part over
    out = m.apply(lambda s: ArrangementState(seal=s.seal, since=s.since))
    assert out.garbage == {"p/a"}


def _drained(state):
    from colmz.arrangement.meta import (
        Description,
        DrainUnsealedReq,
        DrainUnsealedRes,
        TraceBatchMeta,
    )

    b = state.unsealed[0]
    desc = Description(0, 1, 0)
    return DrainUnsealedRes(DrainUnsealedReq(desc, None), TraceBatchMeta(desc, 0, b.keys, b.len, b.size_bytes,
                                                                         b.checks))


class FailingLog:
    """A StateLog whose commit fails with ``error``."""

    def __init__(self, log: StateLog, error: Exception) -> None:
        self.log, self.error, self.key = log, error, log.key

    def load(self):
        return self.log.load()

    def commit(self, expected, state):
        raise self.error


@pytest.mark.parametrize("error, garbage", [(Determinate("refused"), {"p/1"}),
                                            (Indeterminate("timed out"), set())])
def test_an_unknown_outcome_leaves_the_parts_to_gc(error, garbage):
    m = durable(MemConsensus())
    m.log = FailingLog(m.log, error)
    out = m.apply(lambda s: s.update_seal(1), written={"p/1"})
    assert not out.applied and out.error is error and out.garbage == garbage


def test_the_state_document_is_the_state_modules_codec():
    from colmz.arrangement.identity import StoreIdentity

    ident = StoreIdentity.new("arrangement", 0)
    state = ArrangementState().update_seal(4).with_properties({"batch": 3})
    doc = encode_state(state, identity=ident.state_doc())
    assert decode_state(7, doc, store_id=ident.id) == state
    with pytest.raises(IdentityMismatch, match="belongs to store"):
        decode_state(7, doc, store_id="another")
    # the machine encodes with its own identity and the schema a read took from a part
    m = Machine(None, state)
    m.identity, m.home = ident, "file:///x/identity.json"
    assert m.encode(state)["identity"] == {**ident.state_doc(), "blob": "file:///x/identity.json"}
    assert m.decode(7, m.encode(state)) == state
