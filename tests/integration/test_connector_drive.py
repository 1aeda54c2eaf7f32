"""The Google Drive connector end to end: google-api-python-client against the Drive stand-in on
loopback (tests/fakes/drive_server.py), into real PostgreSQL. A folder with a Google Doc, a Word
file, a PDF, an Arabic Doc, an image and a subfolder: first sync, a no-op resync, an edited Doc and
Word file, a trashed file, a rate limit and server errors retried, a sync killed midway and resumed,
a refused token."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.errors import SourceAuthError, SourceError
from cabrain.types import RecallQuery
from tests.conftest import brings, cli_env, crashed_sessions_gone, run_cli_process, start_fake
from tests.integration.connector_kit import edit_state, memories, recorded_hub
from tests.unit.test_gdrive_source import BO, DOC, DOCX, TOKEN, entry, folder

PLAN = "Launch plan\n\nWe ship the mobile app on Friday, after the security review signs it off."
ARABIC = "سياسة العمل عن بعد\n\nيعمل الموظفون من المنزل يومين في الأسبوع بعد موافقة المدير المباشر."


def _docx(escalation: str) -> str:
    from docx import Document as WordDocument

    word = WordDocument()
    word.add_heading("Runbook", level=1)
    word.add_paragraph("Restart the queue workers before the database when the cluster is degraded.")
    word.add_heading("Escalation", level=1)
    word.add_paragraph(escalation)
    out = io.BytesIO()
    word.save(out)
    return base64.b64encode(out.getvalue()).decode()


def _pdf() -> str:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(text="Quarterly report: revenue grew by eight percent in the northern region.")
    return base64.b64encode(bytes(pdf.output())).decode()


TOP = folder("top", "Team", "root")  # the connector's folder itself, read when it is added


def files() -> list[dict[str, Any]]:
    """Folder top: a Doc, a Word file, a PDF, an Arabic Doc, a PNG and folder sub with a text file;
    a file outside the folder and one in the trash."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    return [
        TOP,
        entry("g1", "Launch plan", mime=DOC, text=PLAN, lastModifyingUser=BO),
        entry("w2", "runbook.docx", mime=DOCX, text=None, data_b64=_docx("Page the platform team after ten minutes.")),
        entry("p3", "report", mime="application/pdf", text=None, data_b64=_pdf()),
        entry("a4", "العمل عن بعد", mime=DOC, text=ARABIC),
        entry("b5", "photo.png", mime="image/png", text=None, data_b64=base64.b64encode(png).decode()),
        folder("f6", "sub"),
        entry("s7", "staging.txt", "f6", text="The staging database listens on port 5433 and is rebuilt nightly."),
        entry("o8", "elsewhere.txt", "other", text="Nothing under the folder."),
        entry("x9", "old.txt", text="A file in the trash.", trashed=True),
    ]


@pytest.fixture
@brings("subprocess")
def drive(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"files": files(), "faults": []}))
    proc, port = start_fake("drive_server", "--state", str(state), "--token", TOKEN)
    yield f"http://127.0.0.1:{port}", state
    proc.terminate()
    proc.wait(10)


def _file(data: dict, ident: str) -> dict:
    return next(f for f in data["files"] if f["id"] == ident)


@pytest.fixture
async def hub(brain) -> Connectors:
    made, waits = await recorded_hub(brain, "drive", {"DRIVE_TOKEN": TOKEN, "OLD_TOKEN": "expired"})
    made.waits = waits  # type: ignore[attr-defined]
    return made


def _config(url: str, env: str = "DRIVE_TOKEN") -> dict:
    return {"api_url": url, "token_env": env, "folder_id": "top"}


async def test_a_drive_folder_syncs_incrementally(hub: Connectors, drive, db_dsn: str, brain) -> None:
    url, state = drive
    await hub.add("root", "team-drive", "gdrive", "drive", _config(url))
    first = await hub.sync("root", "team-drive")
    assert first.status == "done", first.error
    assert first.counts["listed"] == 6  # g1 w2 p3 a4 b5 s7: not the folder, the file elsewhere, the trashed one
    assert first.counts["fetched"] == 6 and first.counts["empty"] == 1  # the PNG: listed, nothing to read
    rows = await memories(db_dsn, "drive")
    assert len(rows) == first.counts["added"] == 6  # the Word file's two sections, one part for each other file
    assert {r["source_kind"] for r in rows} == {"gdrive"}
    assert not any("Nothing under the folder" in r["content"] or "trash" in r["content"] for r in rows)

    plan = next(r for r in rows if "security review" in r["content"])  # a Google Doc, exported as text
    assert plan["source_ref"] == "https://docs.google.com/document/d/g1/edit?usp=drivesdk@1"
    meta = json.loads(plan["metadata"])
    assert meta["connector"] == "team-drive" and meta["anchor"] == "" and meta["speaker"] == "Bo Park"
    assert meta["title"] == "Launch plan" and meta["mime_type"] == DOC and "\ufeff" not in plan["content"]
    runbook = sorted((r for r in rows if r["source_ref"].startswith("https://drive.google.com/file/d/w2/")), key=str)
    anchors = sorted(json.loads(r["metadata"])["anchor"] for r in runbook)
    assert anchors == ["Escalation", "Runbook"]  # a Word file converted, a memory per section
    assert all(json.loads(r["metadata"])["format"] == "docx" for r in runbook)
    report = next(r for r in rows if "eight percent" in r["content"])  # a PDF converted
    assert json.loads(report["metadata"])["format"] == "pdf"
    assert report["source_ref"] == "https://drive.google.com/file/d/p3/view?usp=drivesdk@1"
    assert any("5433" in r["content"] for r in rows)  # a file in a subfolder
    assert not any("/b5/" in r["source_ref"] for r in rows)

    found = await brain.recall("root", RecallQuery("when does the mobile app ship", "drive", k=3))
    assert "security review" in found.hits[0].memory.content
    arabic = await brain.recall("root", RecallQuery("العمل من المنزل", "drive", k=3))
    assert "يومين في الأسبوع" in arabic.hits[0].memory.content

    again = await hub.sync("root", "team-drive")
    assert again.counts["unchanged"] == again.counts["listed"] == 6
    assert again.counts["fetched"] == 0 and again.counts["added"] == 0
    assert len(await memories(db_dsn, "drive")) == len(rows)

    # the Doc rewritten, one section of the Word file edited: two revisions, the other section kept
    def change(d: dict) -> None:
        _file(d, "g1").update(text=PLAN.replace("Friday", "Monday"), version="2")
        _file(d, "w2").update(data_b64=_docx("Page the database team after five minutes."), version="2")

    edit_state(state, change)
    edited = await hub.sync("root", "team-drive")
    assert edited.counts["unchanged"] == 4 and edited.counts["fetched"] == 2
    assert edited.counts["revised"] == 2 and edited.counts["added"] == 0 and edited.counts["kept"] == 1
    after = {r["id"]: r for r in await memories(db_dsn, "drive")}
    old = after[plan["id"]]
    assert old["invalid_at"] is not None and old["superseded_by"] is not None
    new = after[old["superseded_by"]]
    assert "on Monday" in new["content"] and new["invalid_at"] is None
    assert new["source_ref"] == "https://docs.google.com/document/d/g1/edit?usp=drivesdk@2"
    current = [r["content"] for r in after.values() if r["invalid_at"] is None]
    assert len(current) == 6 and any("five minutes" in c for c in current)
    assert not any("ten minutes" in c or "on Friday" in c for c in current)
    assert any("Restart the queue workers" in c for c in current)  # the section left alone

    # the PDF trashed: its memory is forgotten, the row kept
    edit_state(state, lambda d: _file(d, "p3").update(trashed=True))
    gone = await hub.sync("root", "team-drive")
    assert gone.counts["listed"] == 5 and gone.counts["deleted"] == 1 and gone.counts["forgotten"] == 1
    trashed = next(r for r in await memories(db_dsn, "drive") if r["id"] == report["id"])
    assert trashed["invalid_at"] is not None and trashed["superseded_by"] is None
    assert "deleted at the source" in json.loads(trashed["metadata"])["forget_reason"]
    runs = await hub.runs("root", "team-drive")
    assert [r["status"] for r in runs] == ["done"] * 4
    assert (await hub.get("root", "team-drive")).status == "ok"


async def test_rate_limits_and_server_errors_are_waited_out(hub: Connectors, drive, db_dsn: str) -> None:
    url, state = drive
    await hub.add("root", "team-drive", "gdrive", "drive", _config(url))
    edit_state(
        state,
        lambda d: d.update(
            faults=[
                {"status": 429, "times": 1, "retry_after": 2, "match": "/files?"},
                {"status": 403, "reason": "userRateLimitExceeded", "times": 1, "match": "/export"},
                {"status": 503, "times": 2, "match": "alt=media"},
            ]
        ),
    )
    report = await hub.sync("root", "team-drive")
    assert report.status == "done" and report.counts["listed"] == 6 and report.counts["fetched"] == 6
    assert len(hub.waits) == 4 and max(hub.waits) >= 2  # type: ignore[attr-defined]
    assert len(await memories(db_dsn, "drive")) == 6


async def test_a_refused_token_stops_the_connector(hub: Connectors, drive) -> None:
    url, _ = drive
    # a token expired after the connector was added (one refused then is refused then)
    await hub.add("root", "team-drive", "gdrive", "drive", _config(url, "OLD_TOKEN"), check=False)
    with pytest.raises(SourceAuthError, match="OLD_TOKEN"):
        await hub.sync("root", "team-drive")
    connector = await hub.get("root", "team-drive")
    assert connector.status == "stopped" and "OLD_TOKEN" in (connector.last_error or "")
    assert hub.waits == []  # type: ignore[attr-defined]


async def test_a_killed_drive_sync_resumes_without_duplicates(hub: Connectors, drive, db_dsn: str, home: Path) -> None:
    url, state = drive
    notes = [
        entry(f"n{i}", f"note {i}.txt", text=f"Meeting note {i}: the team agreed on item {i}.") for i in range(1, 10)
    ]
    edit_state(state, lambda d: d.update(files=[TOP, *notes]))
    await hub.add("root", "team-drive", "gdrive", "drive", _config(url))
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="2")
    crashed = run_cli_process(
        "connectors",
        "sync",
        "team-drive",
        env={**env, "DRIVE_TOKEN": TOKEN, "CABRAIN_FAILPOINTS": "connector.after_write"},
    )
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    assert 0 < len(await memories(db_dsn, "drive")) < 9
    report = await hub.sync("root", "team-drive")
    assert report.status == "done" and report.counts["listed"] == 9
    current = [r["content"] for r in await memories(db_dsn, "drive") if r["invalid_at"] is None]
    assert len(current) == len(set(current)) == 9
    assert all(any(f"Meeting note {i}:" in c for c in current) for i in range(1, 10))
    runs = await hub.runs("root", "team-drive")
    assert [r["status"] for r in runs] == ["done", "interrupted"]  # the killed run, found by the next


async def test_a_drive_folder_is_checked_when_added(hub: Connectors, drive) -> None:
    url, _ = drive
    with pytest.raises(SourceAuthError, match=r"not added: .*OLD_TOKEN was refused") as refused:
        await hub.add("root", "team-drive", "gdrive", "drive", _config(url, "OLD_TOKEN"))
    assert "fresh OAuth 2.0 access token" in (refused.value.hint or "")
    with pytest.raises(SourceError, match="no folder nope is visible") as missing:
        await hub.add("root", "team-drive", "gdrive", "drive", {**_config(url), "folder_id": "nope"})
    assert missing.value.status_code == 404 and "shared_drives" in (missing.value.hint or "")
    with pytest.raises(SourceError, match="'Launch plan', a file, not a folder"):
        await hub.add("root", "team-drive", "gdrive", "drive", {**_config(url), "folder_id": "g1"})
    assert await hub.listing("root") == []
    assert (await hub.add("root", "team-drive", "gdrive", "drive", _config(url))).status == "new"
    whole = {k: v for k, v in _config(url).items() if k != "folder_id"}  # the whole drive: one file listed
    assert (await hub.add("root", "whole-drive", "gdrive", "drive", whole)).status == "new"
