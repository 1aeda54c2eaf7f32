"""Sleep tasks on several nodes open the cold tier at once on a fresh catalog: all of them get the
one catalog and the one table (the losers of the races to create them load the winner's)."""

from __future__ import annotations

import multiprocessing

import pytest

from cabrain.settings import load_settings


def _open(home: str, barrier, out) -> None:
    try:
        barrier.wait(timeout=60)  # all open the fresh catalog at once
        from cabrain.store.cold import ColdTier

        tier = ColdTier(load_settings(home=home))
        out.put(str(tier.table().metadata.table_uuid))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out.put(f"error: {type(exc).__name__}: {exc}")


@pytest.mark.subprocess
def test_processes_racing_to_create_the_catalog_and_table_all_get_it(tmp_path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(6), context.Queue()
    procs = [context.Process(target=_open, args=(str(tmp_path), barrier, out), daemon=True) for _ in range(6)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():  # never leave a child behind: it would hang the interpreter's exit
                p.kill()
    assert not [r for r in results if r.startswith("error")], results
    assert len(set(results)) == 1  # one table, the same for every process
