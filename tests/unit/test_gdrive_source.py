"""The gdrive connector kind against a Drive API stand-in (tests/fakes/drive_server.py) on loopback:
the real google-api-python-client over real HTTP, the shared Retry with its sleeps recorded."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.base import ItemRef, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.connectors.sources import build, configure
from cabrain.errors import InputError, SourceAuthError, SourceError
from tests.conftest import REPO, brings, free_port, loopback_egress
from tests.standins import RunningStand, running

TOKEN = "tok"
DOC = "application/vnd.google-apps.document"
SHEET = "application/vnd.google-apps.spreadsheet"
SLIDES = "application/vnd.google-apps.presentation"
FOLDER = "application/vnd.google-apps.folder"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ANN = {"displayName": "Ann Lee", "emailAddress": "ann@example.com"}
BO = {"displayName": "Bo Park", "emailAddress": "bo@example.com"}


def entry(ident: str, name: str, parent: str = "top", mime: str = "text/plain", **fields: Any) -> dict[str, Any]:
    """A file in the stand-in's state, created in the order of its id's number."""
    number = int("".join(ch for ch in ident if ch.isdigit()) or 0)
    base = {
        "id": ident,
        "name": name,
        "mimeType": mime,
        "parents": [parent],
        "text": f"What {name} says.",
        "version": "1",
        "createdTime": f"2024-01-01T00:{number:02d}:00.000Z",
        "modifiedTime": "2024-03-01T09:00:00.000Z",
        "lastModifyingUser": ANN,
        "owners": [ANN],
    }
    return base | fields


def folder(ident: str, name: str, parent: str = "top") -> dict[str, Any]:
    return entry(ident, name, parent, FOLDER, text="")


def tree() -> list[dict[str, Any]]:
    """Folder top: five files, folder sub (two files, folder deep with one); a file elsewhere."""
    return [
        *(entry(f"t{i}", f"note {i}.txt") for i in range(1, 6)),
        folder("f1", "sub"),
        entry("s1", "sub one.txt", "f1"),
        entry("s2", "sub two.md", "f1", "text/markdown", text="# Sub\n\nTwo."),
        folder("f2", "deep", "f1"),
        entry("d1", "deep.txt", "f2"),
        entry("o1", "elsewhere.txt", "other"),
        entry("x1", "old.txt", trashed=True),
        entry("k1", "a shortcut", mime="application/vnd.google-apps.shortcut"),
    ]


class Stand(RunningStand):
    """The stand-in, and how this kind's tests write its state."""

    def write(self, files: list[dict[str, Any]], **extra: Any) -> None:
        self.state.write_text(json.dumps({"files": files} | extra))

    def edit(self, ident: str, **fields: Any) -> None:
        data = json.loads(self.state.read_text())
        for item in data["files"]:
            if item["id"] == ident:
                item.update(fields)
        self.state.write_text(json.dumps(data))


@pytest.fixture
@brings("subprocess")
def stand(tmp_path: Path) -> Iterator[Stand]:
    with running(
        Stand,
        "drive_server",
        tmp_path,
        {"files": []},
        token=TOKEN,
        kind="gdrive",
        url_key="api_url",
        defaults={"token_env": "GDRIVE_TOKEN"},
    ) as started:
        yield started


@pytest.fixture
def sleeps() -> list[float]:
    return []


def by_key(refs: list[ItemRef]) -> dict[str, ItemRef]:
    return {r.key: r for r in refs}


# --- listing ------------------------------------------------------------------------------------------
def test_scan_walks_the_folder_and_its_subfolders_page_by_page(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree(), max_page_size=2)
    refs = list(stand.source(sleeps, folder_id="top").scan())
    assert [r.key for r in refs] == ["t1", "t2", "t3", "t4", "t5", "s1", "s2", "d1"]
    first = refs[0]
    assert first.version == "1" and first.url == "https://drive.google.com/file/d/t1/view?usp=drivesdk"
    assert first.hint["name"] == "note 1.txt" and first.hint["modifiedBy"] == "Ann Lee"
    listings = stand.requests("/drive/v3/files")
    top = [r["query"] for r in listings if r["query"]["q"] == "'top' in parents and trashed = false"]
    assert [q.get("pageToken") for q in top] == [None, "~2", "~4", "~6"]  # seven live children, two a page
    assert {q["pageSize"] for q in top} == {"100"} and all("nextPageToken" in q["fields"] for q in top)
    assert {r["query"]["q"] for r in listings} >= {
        "'f1' in parents and trashed = false",
        "'f2' in parents and trashed = false",
    }
    assert all(r["authorization"] == f"Bearer {TOKEN}" for r in stand.requests())
    assert sleeps == []


def test_scan_without_a_folder_lists_the_whole_drive_and_shared_drives_on_request(
    stand: Stand, sleeps: list[float]
) -> None:
    stand.write([*tree(), entry("m1", "team plan.txt", "drive-root", driveId="d-1")])
    mine = [r.key for r in stand.source(sleeps).scan()]
    assert sorted(mine) == ["d1", "o1", "s1", "s2", "t1", "t2", "t3", "t4", "t5"]
    every = [r.key for r in stand.source(sleeps, shared_drives=True).scan()]
    assert sorted(every) == sorted([*mine, "m1"])
    queries = [r["query"] for r in stand.requests("/drive/v3/files")]
    assert "corpora" not in queries[0] and queries[0]["q"] == "trashed = false"
    assert queries[-1]["corpora"] == "allDrives" and queries[-1]["includeItemsFromAllDrives"] == "true"
    assert "includeItemsFromAllDrives" not in queries[0]


def test_a_folder_in_a_shared_drive_needs_shared_drives(stand: Stand, sleeps: list[float]) -> None:
    stand.write([entry("s1", "team.txt", "sf", driveId="d-1", text="Team notes.")])
    assert list(stand.source(sleeps, folder_id="sf").scan()) == []
    source = stand.source(sleeps, folder_id="sf", shared_drives=True)
    (ref,) = list(source.scan())
    assert source.fetch(ref).parts[0].text == "Team notes."
    (download,) = stand.requests("/drive/v3/files/s1")
    assert download["query"] == {"alt": "media", "supportsAllDrives": "true"}


def test_versions_move_when_a_file_changes_and_a_trashed_file_leaves_the_listing(
    stand: Stand, sleeps: list[float]
) -> None:
    stand.write(tree())
    source = stand.source(sleeps, folder_id="top")
    before = by_key(list(source.scan()))
    stand.edit("t2", text="Rewritten.", version="2", modifiedTime="2024-03-02T10:00:00.000Z")
    stand.edit("t3", trashed=True)
    stand.edit("d1", version=None, modifiedTime="2024-04-01T00:00:00.000Z")  # no version: the md5 stands in
    after = by_key(list(source.scan()))
    assert "t3" in before and "t3" not in after
    assert after["t2"].version == "2" != before["t2"].version
    assert after["t1"].version == before["t1"].version and after["s1"].version == before["s1"].version
    assert len(after["d1"].version) == 32 and after["d1"].version != before["d1"].version


def test_a_file_deleted_since_the_scan_is_a_404(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree())
    source = stand.source(sleeps, folder_id="top")
    refs = by_key(list(source.scan()))
    stand.write([f for f in tree() if f["id"] != "t1"])
    with pytest.raises(SourceError) as caught:
        source.fetch(refs["t1"])
    assert caught.value.status_code == 404 and "File not found: t1" in caught.value.message
    assert sleeps == []


# --- fetching -----------------------------------------------------------------------------------------
def test_google_formats_are_exported_as_text(stand: Stand, sleeps: list[float]) -> None:
    stand.write(
        [
            entry("g1", "Plan", mime=DOC, text="Launch plan\n\nShip on Friday after the review.", lastModifyingUser=BO),
            entry("g2", "Budget", mime=SHEET, text="item,cost\nservers,120\nlicences,40\n"),
            entry("g3", "Pitch", mime=SLIDES, text="Why now\n\nThe market moved."),
        ]
    )
    source = stand.source(sleeps, folder_id="top")
    docs = {r.key: source.fetch(r) for r in source.scan()}
    plan = docs["g1"]
    assert plan.title == "Plan" and plan.valid_at == datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    assert [p.text for p in plan.parts] == ["Launch plan\n\nShip on Friday after the review."]  # no BOM left
    assert plan.parts[0].speaker == "Bo Park" and plan.metadata["mime_type"] == DOC
    assert "servers,120" in docs["g2"].parts[0].text and "The market moved." in docs["g3"].parts[0].text
    exports = {r["path"]: r["query"]["mimeType"] for r in stand.requests("/export")}
    assert exports == {
        "/drive/v3/files/g1/export": "text/plain",
        "/drive/v3/files/g2/export": "text/csv",
        "/drive/v3/files/g3/export": "text/plain",
    }
    assert stand.requests("/drive/v3/files/g1") == []  # a Google file is never downloaded


def test_word_and_pdf_files_are_downloaded_and_converted(stand: Stand, sleeps: list[float]) -> None:
    from docx import Document as WordDocument
    from fpdf import FPDF

    word = WordDocument()
    word.add_heading("Runbook", level=1)
    word.add_paragraph("Restart the queue workers before the database.")
    word.add_heading("Escalation", level=1)
    word.add_paragraph("Page the platform team after ten minutes.")
    docx_bytes = io.BytesIO()
    word.save(docx_bytes)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(text="Quarterly report: revenue grew by eight percent.")
    pdf_bytes = bytes(pdf.output())
    stand.write(
        [
            entry(
                "w1", "runbook.docx", mime=DOCX, text=None, data_b64=base64.b64encode(docx_bytes.getvalue()).decode()
            ),
            entry("p1", "report", mime="application/pdf", text=None, data_b64=base64.b64encode(pdf_bytes).decode()),
        ]
    )
    source = stand.source(sleeps, folder_id="top")
    docs = {r.key: source.fetch(r) for r in source.scan()}
    runbook = docs["w1"]
    assert runbook.metadata["format"] == "docx"
    assert [p.anchor for p in runbook.parts] == ["Runbook", "Escalation"]
    assert "Restart the queue workers" in runbook.parts[0].text and runbook.parts[1].speaker == "Ann Lee"
    report = docs["p1"]  # no extension: its MIME type says PDF
    assert report.metadata["format"] == "pdf" and "revenue grew by eight percent" in report.parts[0].text
    downloads = stand.requests("/drive/v3/files/w1")
    assert [r["query"] for r in downloads] == [{"alt": "media"}]


def test_files_with_nothing_to_read_are_documents_without_parts(stand: Stand, sleeps: list[float]) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    stand.write(
        [
            entry("b1", "photo.png", mime="image/png", text=None, data_b64=base64.b64encode(png).decode()),
            entry(
                "b2",
                "blob",
                mime="application/octet-stream",
                text=None,
                data_b64=base64.b64encode(b"\x00\x01" * 99).decode(),
            ),
            entry("b3", "Survey", mime="application/vnd.google-apps.form"),
            entry("b4", "Huge sheet", mime=SHEET, export_too_large=True),
            entry("b5", "corrupt.docx", mime=DOCX, text="not a zip at all"),
            entry("t1", "fine.txt"),
        ]
    )
    source = stand.source(sleeps, folder_id="top")
    docs = {r.key: source.fetch(r) for r in source.scan()}
    for key in ("b1", "b2", "b3", "b4", "b5"):
        assert docs[key].parts == (), key
        assert docs[key].metadata["skipped"], key
    assert "too large to be exported" in docs["b4"].metadata["skipped"]
    assert docs["t1"].parts[0].text == "What fine.txt says."
    assert stand.requests("/drive/v3/files/b3") == [] and stand.requests("/b3/export") == []
    assert sleeps == []


def test_a_file_over_the_size_limit_is_skipped_without_a_download(stand: Stand, sleeps: list[float]) -> None:
    stand.write([entry("t1", "big.txt", text="x" * 5000)])
    spec = SourceSpec(
        "gdrive",
        configure("gdrive", {"token_env": "T", "api_url": stand.url}),
        TOKEN,
        max_file_bytes=1000,
        egress=loopback_egress(),
    )
    source = build(spec, Retry(sleep=sleeps.append))
    stand.sources.append(source)
    (ref,) = list(source.scan())
    doc = source.fetch(ref)
    assert doc.parts == () and "over the 1,000-byte limit" in doc.metadata["skipped"]
    assert stand.requests("/drive/v3/files/t1") == []


def test_fetch_without_the_listings_hint_reads_the_metadata(stand: Stand, sleeps: list[float]) -> None:
    stand.write([entry("t1", "note.txt", lastModifyingUser=BO), entry("t2", "bin.txt", trashed=True)])
    source = stand.source(sleeps)
    doc = source.fetch(ItemRef("t1", "1", "https://drive.google.com/file/d/t1/view"))
    assert doc.title == "note.txt" and doc.parts[0].speaker == "Bo Park"
    assert "modifiedTime" in stand.requests("/drive/v3/files/t1")[0]["query"]["fields"]
    with pytest.raises(SourceError) as caught:
        source.fetch(ItemRef("t2", "1", "https://drive.google.com/file/d/t2/view"))
    assert caught.value.status_code == 404 and "in the trash" in caught.value.message


# --- failures -----------------------------------------------------------------------------------------
def test_a_refused_token_stops_at_once_and_names_its_variable(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree())
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps, token="wrong").scan())
    assert "the access token in $GDRIVE_TOKEN was refused" in caught.value.message
    assert "expire" in (caught.value.hint or "")
    assert sleeps == [] and len(stand.requests()) == 1


def test_a_forbidden_file_is_an_auth_error_but_a_rate_limit_403_is_retried(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree(), faults=[{"status": 403, "reason": "insufficientFilePermissions", "match": "/files"}])
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps).scan())
    assert "may not read this" in caught.value.message and sleeps == []
    stand.write(tree(), faults=[{"status": 403, "reason": "userRateLimitExceeded", "times": 2, "match": "/files"}])
    assert len(list(stand.source(sleeps).scan())) == 9
    assert len(sleeps) == 2


def test_a_rate_limit_is_waited_out_as_long_as_it_asks(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree(), faults=[{"status": 429, "retry_after": 7, "match": "/files"}])
    assert len(list(stand.source(sleeps, folder_id="top").scan())) == 8
    assert sleeps == [7.0]


def test_server_errors_retry_the_failing_request_alone(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree(), max_page_size=2, faults=[{"status": 500, "times": 2, "match": "pageToken=~2"}])
    refs = list(stand.source(sleeps, folder_id="top").scan())
    assert len(refs) == 8 and len(sleeps) == 2
    pages = [r["query"].get("pageToken") for r in stand.requests("/drive/v3/files") if "'top'" in r["query"]["q"]]
    assert pages == [None, "~2", "~2", "~2", "~4", "~6"]
    stand.write(tree(), faults=[{"status": 503, "times": 2, "match": "alt=media"}])
    source = stand.source(sleeps, folder_id="top")
    assert source.fetch(next(iter(source.scan()))).parts[0].text == "What note 1.txt says."
    assert len(sleeps) == 4


def test_a_persistent_server_error_gives_up_after_every_attempt(stand: Stand, sleeps: list[float]) -> None:
    stand.write(tree(), faults=[{"status": 502, "times": 99}])
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps).scan())
    assert caught.value.status_code == 502 and not isinstance(caught.value, SourceAuthError)
    assert "gave up after 5 tries" in caught.value.message
    assert len(sleeps) == 4


def test_a_server_that_does_not_answer_is_retried_then_reported(stand: Stand, sleeps: list[float]) -> None:
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps, url=f"http://127.0.0.1:{free_port()}").scan())
    assert caught.value.status_code is None and "Google Drive did not answer" in caught.value.message
    assert len(sleeps) == 4


# --- config -------------------------------------------------------------------------------------------
def test_configure_fills_in_the_defaults() -> None:
    assert configure("gdrive", {"token_env": "GDRIVE_TOKEN"}) == {
        "token_env": "GDRIVE_TOKEN",
        "folder_id": None,
        "api_url": None,
        "shared_drives": False,
    }
    config = configure("gdrive", {"token_env": "T", "folder_id": "1AbC-d_e", "api_url": "https://proxy.lan/"})
    assert config["api_url"] == "https://proxy.lan" and config["folder_id"] == "1AbC-d_e"


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"token_env": "T", "token": "ya29.x"}, "unknown config key(s) token"),
        ({"folder_id": "abc"}, "token_env is required"),
        ({"token_env": "CABRAIN_DATABASE_URL"}, "may not name a CaBrain setting"),
        ({"token_env": "not a name"}, "must name an environment variable"),
        ({"token_env": "T", "api_url": "www.googleapis.com"}, "api_url must be an http:// or https:// URL"),
        ({"token_env": "T", "folder_id": "x' or name contains 'y"}, "folder_id must be a Drive folder id"),
        ({"token_env": "T", "shared_drives": "yes"}, "shared_drives must be true or false"),
    ],
)
def test_configure_rejects_what_it_cannot_use(config: dict[str, Any], complaint: str) -> None:
    with pytest.raises(InputError) as caught:
        configure("gdrive", config)
    assert complaint in caught.value.message


def test_building_without_a_token_says_which_variable_to_set() -> None:
    with pytest.raises(SourceAuthError) as caught:
        build(SourceSpec("gdrive", {"token_env": "GDRIVE_TOKEN"}), Retry())
    assert "$GDRIVE_TOKEN" in caught.value.message


@pytest.mark.subprocess
def test_the_kind_imports_the_google_client_only_when_a_source_is_built() -> None:
    code = (
        "import sys, cabrain.connectors.sources.gdrive as g; "
        "print(g.KIND, g.LOCAL, 'googleapiclient' in sys.modules, 'httplib2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["gdrive", "False", "False", "False"]
