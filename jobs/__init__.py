"""Ray job entrypoints for CaBrain's offline plane, run as ``python -m jobs.<name>``.

Each module exposes ``main(argv=None) -> int``. The sleep cycle lands with its own issue; this
package is declared now so that the distribution layout is fixed from the first release.
"""
