"""cabrain.localfiles on real files: a ZIP whose header lies about a member's size, a FIFO planted in
a folder, a path with '..', and roots named through a link of the operator's own."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path

import pytest

from cabrain.localfiles import Archive, ArchiveLimits, ArchiveTooLarge, LinkRefused, open_below, open_confined


def _lying_zip(real: int, claimed: int) -> bytes:
    """A ZIP of one member of ``real`` bytes whose local and central headers both claim ``claimed``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("users.json", b"x" * real)
    data = bytearray(buffer.getvalue())
    local = data.index(b"PK\x03\x04")
    struct.pack_into("<I", data, local + 22, claimed)  # uncompressed size in the local header
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, claimed)  # and in the central directory
    return bytes(data)


def test_a_member_whose_header_lies_is_never_read_past_the_limit() -> None:
    limits = ArchiveLimits(max_member_bytes=4096, ratio_floor_bytes=1 << 30)
    with Archive(io.BytesIO(_lying_zip(real=1 << 20, claimed=100)), limits, name="export.zip") as archive:
        with pytest.raises((ArchiveTooLarge, zipfile.BadZipFile)):
            got = archive.read("users.json")
            assert len(got) <= limits.max_member_bytes  # whatever comes back stays in bounds


def test_member_count_total_and_ratio() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(5):
            zf.writestr(f"day-{i}.json", b"[" + b" " * 3000 + b"]")
    with pytest.raises(ArchiveTooLarge, match="5 members"):
        Archive(io.BytesIO(buffer.getvalue()), ArchiveLimits(max_members=4), name="e.zip")
    with Archive(io.BytesIO(buffer.getvalue()), ArchiveLimits(max_total_bytes=7000), name="e.zip") as archive:
        archive.read("day-0.json")
        archive.read("day-1.json")
        with pytest.raises(ArchiveTooLarge, match="in all"):
            archive.read("day-2.json")
    with Archive(io.BytesIO(buffer.getvalue()), ArchiveLimits(max_ratio=5, ratio_floor_bytes=100), name="e.zip") as a:
        with pytest.raises(ArchiveTooLarge, match="times its"):
            a.read("day-0.json")


def test_fifos_dotdot_and_operator_roots(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "docs").mkdir(parents=True)
    (real / "docs" / "a.md").write_text("a")
    os.mkfifo(real / "docs" / "pipe.md")  # opening it must not hang, nor read it
    root_link = tmp_path / "root-link"
    os.symlink(real, root_link)  # the operator's own root, named through a link: followed there
    fd = open_confined(root_link / "docs", [str(root_link)], folder=True)
    try:
        with pytest.raises(LinkRefused, match="not a plain file"):
            open_below(fd, "pipe.md")
        with pytest.raises(LinkRefused, match=r"'\.\.'"):
            open_below(fd, "../docs/a.md")
        os.close(open_below(fd, "a.md"))
    finally:
        os.close(fd)
    with pytest.raises(LinkRefused, match="outside"):
        open_confined(real / "docs" / ".." / ".." / "etc", [str(real)])
