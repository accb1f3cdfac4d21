"""``cancel_all`` ends a task that swallowed its cancellation (as Python 3.11's ``wait_for`` can
when a cancel and its timeout coincide), instead of waiting for it forever."""

import asyncio

from signalbus_client.session import cancel_all


async def test_a_task_that_swallows_one_cancel_still_ends() -> None:
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()  # the first cancel is lost, as in the wait_for race

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    # Waited for without cancelling it on timeout: a cancel would reach the task through it.
    closing = asyncio.create_task(cancel_all([task]))
    await asyncio.wait({closing}, timeout=5)
    try:
        assert closing.done(), "cancel_all waited forever for a task that swallowed its cancel"
        assert swallowed.is_set() and task.cancelled()
    finally:
        task.cancel()
        closing.cancel()


async def test_a_failed_task_is_waited_for_and_its_error_retrieved() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await cancel_all([task])
    assert task.done() and not task.cancelled()
