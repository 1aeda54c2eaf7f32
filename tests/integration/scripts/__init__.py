import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def private_ray_tmpdir() -> Iterator[str]:
    """A private, short folder (mode 0700) for what a ``ray.cluster_utils.Cluster`` writes by
    default under /tmp/ray (its nodes' sessions, the address file), removed afterwards: a script
    leaves nothing in the shared /tmp/ray."""
    folder = tempfile.mkdtemp(prefix="cabrain-ray-", dir="/tmp")  # short: Ray's sockets live under it
    os.environ["RAY_TMPDIR"] = folder
    try:
        yield folder
    finally:
        os.environ.pop("RAY_TMPDIR", None)
        shutil.rmtree(folder, ignore_errors=True)
