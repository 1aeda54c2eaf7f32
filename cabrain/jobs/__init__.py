"""Ray job entrypoints for CaBrain's offline plane, run as ``python -m cabrain.jobs.<name>``.

Each module exposes ``main(argv=None) -> int``. The top-level ``jobs/`` of a checkout holds shims
with the same names, so ``python -m jobs.<name>`` keeps working there.
"""
