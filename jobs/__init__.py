"""Shims kept at the top of a checkout so that ``ray job submit --working-dir . -- python -m jobs.<name>``
keeps working; the entrypoints live in :mod:`cabrain.jobs` (``python -m cabrain.jobs.<name>``), which is
what a wheel installs.
"""
