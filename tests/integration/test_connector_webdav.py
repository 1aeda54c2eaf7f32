"""The WebDAV connector against a real WebDAV server (WsgiDAV on loopback, basic auth, the way a
Nextcloud account is reached): first sync of text, Markdown, PDF and office files, a no-op resync,
an edit, a deletion, a sync killed midway and resumed, and a wrong password that stops it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.errors import SourceAuthError, SourceError
from tests.conftest import REPO, brings, cli_env, crashed_sessions_gone, free_port, run_cli_process, wait_for_port
from tests.integration.connector_kit import memories

PASSWORD = "correct horse battery staple"


@pytest.fixture
@brings("subprocess")
def dav(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A WsgiDAV server sharing a folder, user alice with a password, on a loopback port."""
    share = tmp_path / "share"
    (share / "Documents").mkdir(parents=True)
    port = free_port()
    config = tmp_path / "wsgidav.json"
    config.write_text(
        json.dumps(
            {
                "host": "127.0.0.1",
                "port": port,
                "provider_mapping": {"/": str(share)},
                "simple_dc": {"user_mapping": {"*": {"alice": {"password": PASSWORD}}}},
                "http_authenticator": {"accept_basic": True, "accept_digest": False, "default_to_digest": False},
                "verbose": 0,
                "logging": {"enable_loggers": []},
            }
        )
    )
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "wsgidav"), "-c", str(config)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not wait_for_port(port, timeout=20):
            pytest.fail("wsgidav did not start")
        yield f"http://127.0.0.1:{port}", share
    finally:
        proc.terminate()
        proc.wait(10)


def _docx(path: Path, heading: str, text: str) -> None:
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    document.add_paragraph(text)
    document.save(str(path))


def _pdf(path: Path, lines: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    for line in lines:
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.cell(text=line)
    pdf.output(str(path))


@pytest.fixture
async def hub(brain) -> Connectors:
    await brain.create_namespace("root", "cloud")
    return Connectors(brain.engine, environ={"DAV_PASSWORD": PASSWORD, "WRONG_PASSWORD": "nope"}, local_roots=[])


def _config(url: str, secret_env: str = "DAV_PASSWORD") -> dict:
    return {"url": url, "path": "/Documents", "username": "alice", "token_env": secret_env}


async def test_webdav_files_sync_edit_delete(hub: Connectors, dav: tuple[str, Path], db_dsn: str) -> None:
    url, share = dav
    docs = share / "Documents"
    (docs / "README.md").write_text("# Team cloud\n\nThe shared drive holds contracts and the brand kit.\n")
    (docs / "meeting.txt").write_text("Budget review moved to the 14th; finance brings the Q3 numbers.")
    _docx(docs / "policy.docx", "Travel policy", "Economy class for flights under six hours.")
    _pdf(docs / "report.pdf", ["Revenue grew nine percent in the third quarter.", "Churn fell to two percent."])
    (docs / "Archive").mkdir()
    (docs / "Archive" / "old.md").write_text("# Old\n\nThe old office was on Baker Street.\n")
    (docs / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))

    await hub.add("root", "team-cloud", "webdav", "cloud", _config(url))
    first = await hub.sync("root", "team-cloud")
    assert first.status == "done", first.error
    assert first.counts["listed"] == 5  # the JPEG is not a document
    contents = " ".join(r["content"] for r in await memories(db_dsn, "cloud"))
    for phrase in ("brand kit", "Q3 numbers", "Economy class", "nine percent", "Churn fell", "Baker Street"):
        assert phrase in contents
    pdf = next(r for r in await memories(db_dsn, "cloud") if "nine percent" in r["content"])
    assert pdf["source_kind"] == "webdav" and pdf["source_ref"].startswith(f"{url}/Documents/report.pdf@")

    again = await hub.sync("root", "team-cloud")
    assert again.counts["unchanged"] == 5 and again.counts["fetched"] == 0 and again.counts["added"] == 0

    _docx(docs / "policy.docx", "Travel policy", "Business class for flights over six hours.")
    (docs / "Archive" / "old.md").unlink()
    changed = await hub.sync("root", "team-cloud")
    assert changed.counts["revised"] == 1 and changed.counts["deleted"] == 1 and changed.counts["forgotten"] == 1
    rows = await memories(db_dsn, "cloud")
    current = " ".join(r["content"] for r in rows if r["invalid_at"] is None)
    assert "Business class" in current and "Economy class" not in current and "Baker Street" not in current
    assert any("Economy class" in r["content"] and r["superseded_by"] for r in rows)  # kept, superseded


async def test_a_wrong_password_stops_the_connector(hub: Connectors, dav: tuple[str, Path]) -> None:
    url, _ = dav
    # a password that went wrong after the connector was added (one wrong then is refused then)
    await hub.add("root", "team-cloud", "webdav", "cloud", _config(url, "WRONG_PASSWORD"), check=False)
    with pytest.raises(SourceAuthError, match="refused the credential"):
        await hub.sync("root", "team-cloud")
    connector = await hub.get("root", "team-cloud")
    assert connector.status == "stopped" and "WRONG_PASSWORD" in (connector.last_error or "")


async def test_a_killed_webdav_sync_resumes(hub: Connectors, dav: tuple[str, Path], db_dsn: str, home: Path) -> None:
    url, share = dav
    for i in range(6):
        (share / "Documents" / f"note-{i}.md").write_text(f"# Note {i}\n\nRoom {i} seats {i + 4} people.\n")
    await hub.add("root", "team-cloud", "webdav", "cloud", _config(url))
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="2")
    crashed = run_cli_process(
        "connectors",
        "sync",
        "team-cloud",
        env={**env, "DAV_PASSWORD": PASSWORD, "CABRAIN_FAILPOINTS": "connector.after_write"},
    )
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    assert 0 < len(await memories(db_dsn, "cloud")) < 6
    done = await hub.sync("root", "team-cloud")
    assert done.status == "done"
    current = [r["content"] for r in await memories(db_dsn, "cloud") if r["invalid_at"] is None]
    assert len(current) == len(set(current)) == 6, "a note was written twice, or lost"
    assert all(any(f"Room {i} seats {i + 4} people" in c for c in current) for i in range(6))


async def test_a_webdav_folder_is_checked_when_added(hub: Connectors, dav: tuple[str, Path]) -> None:
    url, share = dav
    (share / "Documents" / "README.md").write_text("# Team cloud\n")
    with pytest.raises(SourceAuthError, match=r"not added: .*refused the credential") as refused:
        await hub.add("root", "team-cloud", "webdav", "cloud", _config(url, "WRONG_PASSWORD"))
    assert "WRONG_PASSWORD" in refused.value.message and "app password" in (refused.value.hint or "")
    with pytest.raises(SourceError, match="there is no folder /Missing") as missing:
        await hub.add("root", "team-cloud", "webdav", "cloud", {**_config(url), "path": "/Missing"})
    assert missing.value.status_code == 404 and "remote.php/dav/files/USER" in (missing.value.hint or "")
    with pytest.raises(SourceError, match="is a file, not a folder"):
        await hub.add("root", "team-cloud", "webdav", "cloud", {**_config(url), "path": "/Documents/README.md"})
    assert await hub.listing("root") == []
    assert (await hub.add("root", "team-cloud", "webdav", "cloud", _config(url))).status == "new"
