"""The entity pages: a namespace's entities with their summaries and mention counts, one entity with
the memories that mention it, and its neighbourhood drawn as a graph (``graph.json`` feeds the page's
canvas; the same nodes and edges are listed as links for keyboards and screen readers); renaming an
entity and merging it into another (each a judgment, reverted from the page it lands on)."""

from __future__ import annotations

import urllib.parse

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from cabrain.errors import InputError
from cabrain.search.graph import MAX_MEMORIES
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.pages import readable_namespaces
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.deps import Svc

routes = router()
PAGE_SIZE = 100


@routes.get("/entities")
async def entities(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespaces = await readable_namespaces(svc, session.agent)
    namespace = filters.field(params, "namespace") or (namespaces[0]["name"] if namespaces else "")
    query, cursor = filters.field(params, "q") or None, filters.field(params, "cursor") or None
    sort = "mentions" if filters.field(params, "sort") == "mentions" else "name"
    found, next_url = [], None
    if namespace:
        result = await svc.run(
            lambda b: b.entities(session.agent, namespace, query=query, limit=PAGE_SIZE, cursor=cursor, sort=sort)
        )
        found = result.entities
        if result.next_cursor:
            more = {"namespace": namespace, "q": query or "", "sort": sort, "cursor": result.next_cursor}
            next_url = f"{sessions.PATH}/entities?{urllib.parse.urlencode(more)}"
    return page(
        request,
        "entities.html",
        title="Entities",
        namespaces=namespaces,
        values={"namespace": namespace, "q": query or "", "sort": sort},
        entities=found,
        next_url=next_url,
    )


@routes.get("/graph.json")
async def graph_json(request: Request, svc: Svc, session: Current) -> Response:
    namespace, name = filters.field(request.query_params, "namespace"), filters.field(request.query_params, "entity")
    limit = int(filters.number(request.query_params, "limit", low=1, high=MAX_MEMORIES, integer=True) or 300)
    found = await svc.run(lambda b: b.entity_graph(session.agent, namespace, name, limit=limit))
    return JSONResponse(found, headers=HEADERS)


@routes.get("/entity")
async def entity(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespace, name = filters.field(params, "namespace"), filters.field(params, "name")
    limit = int(filters.number(params, "limit", low=1, high=MAX_MEMORIES, integer=True) or 300)
    found = await svc.run(lambda b: b.entity(session.agent, namespace, name, history=False, limit=50))
    graph_url = f"{sessions.PATH}/graph.json?" + urllib.parse.urlencode(
        {"namespace": namespace, "entity": str(found.entity.id), "limit": limit}
    )
    return page(
        request,
        "entity.html",
        title=found.entity.name,
        found=found,
        namespace=namespace,
        name=name,
        graph_url=graph_url,
        limit=limit,
        limits=[100, 300, 1000, MAX_MEMORIES],
        done=filters.field(params, "done"),
        judgment=filters.field(params, "judgment"),
    )


def _entity_url(namespace: str, name: str, **more: str) -> str:
    return f"{sessions.PATH}/entity?" + urllib.parse.urlencode({"namespace": namespace, "name": name, **more})


@routes.post("/entity/rename")
async def rename(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    namespace, name, new_name = text(form, "namespace"), text(form, "name"), text(form, "new_name")
    reason = text(form, "reason") or None
    judgment = await svc.run(lambda b: b.rename_entity(session.agent, namespace, name, new_name, reason=reason))
    renamed = judgment["entities"][0]["entity_id"]  # its old name no longer finds it
    return see_other(_entity_url(namespace, renamed, done="renamed", judgment=judgment["id"]))


@routes.post("/entity/merge")
async def merge(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError(
            "tick the confirmation to merge these entities", hint="a merge is a judgment: it can be reverted"
        )
    namespace, name, into = text(form, "namespace"), text(form, "name"), text(form, "into")
    reason = text(form, "reason") or None
    judgment = await svc.run(lambda b: b.merge_entity(session.agent, namespace, name, into, reason=reason))
    target = judgment["entities"][0]["into"]
    return see_other(_entity_url(namespace, target, done="merged", judgment=judgment["id"]))


@routes.post("/entity/revert")
async def revert(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to revert this change", hint="a revert can itself be reverted")
    namespace, name, judgment_id = text(form, "namespace"), text(form, "name"), text(form, "judgment")
    undo = await svc.run(lambda b: b.revert(session.agent, judgment_id=judgment_id))
    return see_other(_entity_url(namespace, name, done="reverted", judgment=undo["id"]))
