"""Read-your-writes with replicas of the hot tier (issue 37): the WAL positions a write answers with,
and the Python client carrying the latest one to its next requests."""

from __future__ import annotations

import httpx
import pytest

from cabrain import gate
from cabrain.brain import Brain
from cabrain.client.base import LSN_HEADER, Transport
from cabrain.serve.standbys import _read_posts
from cabrain.store.replicas import format_lsn, parse_lsn


def test_wal_positions_read_and_written_as_postgresql_does() -> None:
    assert parse_lsn("0/16B3740") == 0x16B3740
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"
    assert parse_lsn("1/0") > parse_lsn("0/FFFFFFFF")
    for bad in ("", "16", "/1", "1/", "x/1", "123456789/0", "1/2/3"):
        with pytest.raises(ValueError, match="not a WAL position"):
            parse_lsn(bad)


def test_the_posts_of_read_operations_are_reads() -> None:
    reads = _read_posts()  # from the declarations: Brain.recall's and Brain.recall_archive's among them
    declared = gate.declared(Brain.recall)
    assert declared is not None and declared.faces.http == ("POST /v1/recall",)
    assert reads.fullmatch("/v1/recall") and reads.fullmatch("/v1/recall/archive")
    assert not reads.fullmatch("/v1/memories") and not reads.fullmatch("/v1/memories/batch")


async def test_the_client_sends_back_the_latest_position_it_was_given() -> None:
    seen: list[str | None] = []
    answers = iter(["0/3000", None, "0/2000", "1/0", None])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get(LSN_HEADER))
        given = next(answers)
        return httpx.Response(200, json={}, headers={LSN_HEADER: given} if given else {})

    async with Transport("http://cabrain.test", "cbk_x", transport=httpx.MockTransport(handler)) as client:
        for method in ("POST", "GET", "POST", "POST", "GET"):
            await client.request(method, "/v1/anything")
    # none before the first write; then the newest it was given (an older one does not go back)
    assert seen == [None, "0/3000", "0/3000", "0/3000", "1/0"]
