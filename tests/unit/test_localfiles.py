"""cabrain.localfiles on real files: a ZIP whose header lies about a member's size, a FIFO planted in
a folder, a path with '..', and roots named through a link of the operator's own."""

from __future__ import annotations

import gc
import io
import os
import struct
import zipfile
from pathlib import Path

import pytest

from cabrain.localfiles import (
    Archive,
    ArchiveLimits,
    ArchiveTooLarge,
    LinkRefused,
    open_below,
    open_confined,
    open_file,
)


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


@pytest.mark.parametrize("content", [b"notes, not a zip", b""])
def test_a_file_that_is_not_a_zip_is_closed_once_and_at_once(tmp_path: Path, content: bytes) -> None:
    """The archive owns the file it was given: refused, it closes it then, and nothing closes the
    descriptor's number again later (a file object left to the garbage collector did, after its
    caller had closed the number: by then an unrelated socket held it - a database connection
    broken in the middle of another test)."""
    notes = tmp_path / "notes.zip"
    notes.write_bytes(content)
    fd = os.open(notes, os.O_RDONLY)
    with pytest.raises(zipfile.BadZipFile) as refused:
        Archive(open_file(fd), ArchiveLimits(), name=str(notes))
    reused = os.open(notes, os.O_RDONLY)  # the lowest free number: fd's, if it was closed
    try:
        assert reused == fd
        del refused
        gc.collect()  # whatever held the file object goes now
        os.fstat(reused)  # still open: nothing closed the number a second time
    finally:
        os.close(reused)


def test_a_zip_over_the_limits_closes_its_file(tmp_path: Path) -> None:
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(3):
            zf.writestr(f"{i}.json", "[]")
    fd = os.open(many, os.O_RDONLY)
    with pytest.raises(ArchiveTooLarge):
        Archive(open_file(fd), ArchiveLimits(max_members=2), name=str(many))
    with pytest.raises(OSError):
        os.fstat(fd)  # closed by the archive that refused it
    fd = os.open(many, os.O_RDONLY)
    with Archive(open_file(fd), ArchiveLimits(), name=str(many)) as archive:
        assert sorted(archive.namelist()) == ["0.json", "1.json", "2.json"]
    with pytest.raises(OSError):
        os.fstat(fd)  # and by one closed after use
