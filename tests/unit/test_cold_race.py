"""Sleep tasks on several nodes open the cold tier at once on a fresh catalog: all of them get the
one table (the losers of the race to create it load the winner's)."""

from __future__ import annotations

import multiprocessing

from cabrain.settings import load_settings


def _open(home: str, barrier, out) -> None:  # noqa: ANN001
    from cabrain.sleep.cold import ColdTier

    tier = ColdTier(load_settings(home=home))
    barrier.wait()
    try:
        out.put(str(tier.table().metadata.table_uuid))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out.put(f"error: {exc}")


def test_processes_racing_to_create_the_table_all_get_it(tmp_path) -> None:  # noqa: ANN001
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(6), context.Queue()
    procs = [context.Process(target=_open, args=(str(tmp_path), barrier, out)) for _ in range(6)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert not [r for r in results if r.startswith("error")], results
    assert len(set(results)) == 1  # one table, the same for every process
