"""An agent's slots (cabrain/limits.py): held and given back however the holder ends, a waiter that
gives up leaves no slot behind, and another agent is never held up."""

from __future__ import annotations

import asyncio

import pytest

from cabrain.errors import ServiceBusy
from cabrain.limits import AgentSlots


def slots(limit: int, queued: int) -> AgentSlots:
    return AgentSlots(limit, queued, refusal=lambda agent, n: f"{agent} holds {n}", setting="CABRAIN_TEST_LIMIT")


async def test_a_slot_is_given_back_when_its_holder_fails_or_is_cancelled() -> None:
    s = slots(1, 1)
    with pytest.raises(RuntimeError):
        async with s.hold("a"):
            raise RuntimeError("the operation failed")
    assert (s.running("a"), s.waiting("a")) == (0, 0)

    entered, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with s.hold("a"):
            entered.set()
            await release.wait()

    task = asyncio.create_task(holder())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (s.running("a"), s.waiting("a")) == (0, 0)


async def test_waiters_queue_up_to_the_limit_and_one_more_is_refused() -> None:
    s = slots(1, 2)
    release = asyncio.Event()
    order: list[int] = []

    async def op(i: int) -> None:
        async with s.hold("a"):
            order.append(i)
            await release.wait()

    tasks = [asyncio.create_task(op(i)) for i in range(3)]
    while s.waiting("a") < 2:
        await asyncio.sleep(0)
    assert s.running("a") == 1
    with pytest.raises(ServiceBusy, match="a holds 1") as refused:
        async with s.hold("a"):
            pass
    assert refused.value.status == 429 and "CABRAIN_TEST_LIMIT" in (refused.value.hint or "")
    async with s.hold("b"):  # another agent is not held up
        assert s.running("b") == 1
    release.set()
    await asyncio.gather(*tasks)
    assert sorted(order) == [0, 1, 2]
    assert (s.running("a"), s.waiting("a"), s.running("b")) == (0, 0, 0)


async def test_a_waiter_that_gives_up_leaves_the_slot_to_the_next() -> None:
    s = slots(1, 2)
    release = asyncio.Event()
    got: list[str] = []

    async def op(name: str) -> None:
        async with s.hold("a"):
            got.append(name)
            await release.wait()

    first = asyncio.create_task(op("first"))
    while s.running("a") < 1:
        await asyncio.sleep(0)
    quitter = asyncio.create_task(op("quitter"))
    patient = asyncio.create_task(op("patient"))
    while s.waiting("a") < 2:
        await asyncio.sleep(0)
    quitter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await quitter
    assert s.waiting("a") == 1
    release.set()
    await asyncio.gather(first, patient)
    assert got == ["first", "patient"]


def test_a_stream_slot_is_taken_at_once_or_refused_and_given_back_once() -> None:
    s = slots(2, 0)
    give_backs = [s.take("a"), s.take("a")]
    with pytest.raises(ServiceBusy):
        s.take("a")
    give_backs[0]()
    give_backs[0]()  # twice is once
    assert s.running("a") == 1
    again = s.take("a")
    with pytest.raises(ServiceBusy):
        s.take("a")
    give_backs[1]()
    again()
    assert s.running("a") == 0
