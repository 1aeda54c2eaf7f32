"""An import uploaded over HTTP is saved under its own name, made safe: any name gives one file name."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st


@given(st.text(max_size=300))
def test_an_uploads_name_is_always_one_safe_file_name(filename: str) -> None:
    from cabrain.serve.routes.portable import _upload_name

    for fmt in ("mem0", "markdown"):
        name = _upload_name(filename, fmt)
        assert name and len(name) <= 120 and "/" not in name and "\\x00" not in name and name not in (".", "..")
