"""The console's pure parts: where sign-in may lead, CSRF tokens, origins, page cursors, filter
fields and the health page's reading of the metrics."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from starlette.requests import Request

from cabrain.errors import AccessDenied, InputError
from cabrain.serve.console import filters, session
from cabrain.serve.console.health import MIN_REQUESTS, bound, summarize
from cabrain.store.browse import BrowseFilters, cursor_of, parse_cursor
from cabrain.types import Network


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (None, "/console/memories"),
        ("/console/recall?q=x", "/console/recall?q=x"),
        ("/console", "/console"),
        ("https://evil.example/console/memories", "/console/memories"),
        ("//evil.example/console", "/console/memories"),
        ("/v1/memories", "/console/memories"),
        ("/consoleX", "/console/memories"),
        ("/console/\\evil", "/console/memories"),
        ("javascript:alert(1)", "/console/memories"),
        ("/console/..//evil.example/x", "/console/memories"),
    ],
)
def test_sign_in_leads_only_to_console_pages(target: str | None, expected: str) -> None:
    assert session.safe_next(target) == expected


def test_csrf_tokens_differ_per_key_and_are_checked_in_constant_time() -> None:
    a, b = session.csrf_token("cbk_a"), session.csrf_token("cbk_b")
    assert a != b and len(a) == 64 and "cbk_a" not in a
    session.check_csrf(a, a)
    for wrong in (None, "", b, a[:-1]):
        with pytest.raises(AccessDenied):
            session.check_csrf(wrong, a)


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/console/x", "headers": raw, "scheme": "http"})


def test_a_change_from_another_origin_is_refused() -> None:
    session.check_origin(_request({"Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:8000"}))
    session.check_origin(_request({"Host": "127.0.0.1:8000"}))  # neither header: the CSRF token decides
    session.check_origin(_request({"Host": "127.0.0.1:8000", "Referer": "http://127.0.0.1:8000/console/memories"}))
    for headers in (
        {"Host": "127.0.0.1:8000", "Origin": "http://evil.example"},
        {"Host": "127.0.0.1:8000", "Origin": "null"},
        {"Host": "127.0.0.1:8000", "Referer": "http://evil.example/console"},
    ):
        with pytest.raises(AccessDenied):
            session.check_origin(_request(headers))


def test_page_cursors_round_trip_and_bad_ones_are_input_errors() -> None:
    at, ident = datetime(2026, 12, 1, 9, 30, tzinfo=UTC), uuid.uuid4()
    assert parse_cursor(cursor_of(at, ident)) == (at, ident)
    for bad in ("nope", "bm90IGEgY3Vyc29y", cursor_of(at, ident)[:-6]):
        with pytest.raises(InputError, match="page cursor"):
            parse_cursor(bad)


def test_filter_fields_become_browse_filters_with_clear_errors() -> None:
    chosen = filters.browse_filters(
        {"network": "fact", "from": "2026-11-01", "to": "2026-11-30", "min_importance": "0.5", "history": "1"}
    )
    assert chosen == BrowseFilters(
        networks=(Network.FACT,),
        valid_from=datetime(2026, 11, 1, tzinfo=UTC),
        valid_to=datetime(2026, 12, 1, tzinfo=UTC),  # the whole last day
        min_importance=0.5,
        history=True,
    )
    for params, message in (
        ({"network": "dreams"}, "network"),
        ({"from": "yesterday"}, "not a date"),
        ({"min_importance": "2"}, "between 0 and 1"),
        ({"min_importance": "high"}, "not a number"),
        ({"from": "2026-11-30", "to": "2026-11-01"}, "before"),
    ):
        with pytest.raises(InputError, match=message):
            filters.browse_filters(params)


def test_percentiles_are_the_bounds_of_their_buckets_and_need_enough_requests() -> None:
    buckets = [(10.0, 50.0), (20.0, 90.0), (50.0, 100.0), (float("inf"), 100.0)]
    assert bound(buckets, 0.5) == 10.0
    assert bound(buckets, 0.7) == 20.0  # at most 20 ms: not 15, a point no request was measured at
    assert bound(buckets, 0.95) == 50.0
    assert bound([(10.0, 90.0), (float("inf"), 100.0)], 0.95) == float("inf")  # above the last bound
    # five requests, one slow: no "p95 2125 ms" drawn from a bucket's width, but too few to tell
    five = [(5.0, 4.0), (2500.0, 4.0), (5000.0, 5.0), (float("inf"), 5.0)]
    assert bound(five, 0.95) is None and bound([], 0.5) is None
    assert bound([(10.0, MIN_REQUESTS)], 0.95) == 10.0


def test_the_metrics_page_is_summed_over_replicas() -> None:
    text = "\n".join(
        [
            "# TYPE ray_cabrain_http_request_latency_ms histogram",
            *(
                f'ray_cabrain_http_request_latency_ms_bucket{{route="/v1/recall",method="POST",status="200",'
                f'replica="{r}",le="{le}"}} {n}'
                for r in ("a", "b")
                for le, n in (("10.0", 5), ("50.0", 9), ("+Inf", 10))
            ),
            'ray_cabrain_http_request_latency_ms_count{route="/v1/recall",method="POST",status="200",replica="a"} 10',
            "# TYPE ray_cabrain_cache_lookups counter",
            'ray_cabrain_cache_lookups_total{result="hit",replica="a"} 3',
            'ray_cabrain_cache_lookups_total{result="miss",replica="b"} 1',
        ]
    )
    out = summarize(text + "\n")
    assert out["routes"]["/v1/recall"]["requests"] == 20
    assert out["routes"]["/v1/recall"]["p50"] == pytest.approx(10.0)
    assert (out["cache_hits"], out["cache_lookups"], out["cache_ratio"]) == (3, 4, 0.75)


def test_line_charts_scale_to_their_top_and_bars_to_the_largest() -> None:
    from cabrain.serve.console import charts

    assert charts.line([]) is None
    drawn = charts.line([("2026-11-01", 0.5), ("2026-11-02", 1.0), ("2026-11-03", 0.0)], top=1.0, width=224, height=124)
    assert drawn is not None
    assert drawn.points == "24.0,62.0 112.0,24.0 200.0,100.0"  # half way up, the top, the axis
    assert (drawn.first, drawn.last, drawn.top) == ("2026-11-01", "2026-11-03", "1")
    assert drawn.dots[1][2] == "2026-11-02: 1"
    one = charts.line([("d", 3.0)])
    assert one is not None and one.top == "3" and one.points == "24.0,24.0"
    assert [(b.label, b.width) for b in charts.bars({"a": 2.0, "b": 1.0, "c": -0.5, "d": 0.0})] == [
        ("a", 100.0),
        ("b", 50.0),
        ("c", 25.0),
        ("d", 0.0),
    ]


async def test_a_slow_check_runs_once_then_in_the_background_when_stale() -> None:
    import asyncio

    from cabrain.serve.console.health import Cached, Part

    calls: list[int] = []
    release = asyncio.Event()

    async def check() -> Part:
        calls.append(1)
        if len(calls) > 1:
            await release.wait()
        return Part("cold tier (Iceberg)", True, f"check {len(calls)}")

    cached = Cached(ttl=60.0)
    first = await cached.get(check)  # the first view waits for it
    assert first.detail == "check 1" and first.checked_at is not None
    assert (await cached.get(check)).detail == "check 1" and len(calls) == 1  # fresh: not run again
    stale = first.checked_at + 61.0
    again = await cached.get(check, now=stale)  # stale: the last result at once, a check behind it
    assert again.detail == "check 1"
    await asyncio.sleep(0)
    assert len(calls) == 2 and cached.task is not None
    assert (await cached.get(check, now=stale)).detail == "check 1" and len(calls) == 2  # one at a time
    release.set()
    await asyncio.sleep(0.01)
    assert cached.task is None and (await cached.get(check)).detail == "check 2"
