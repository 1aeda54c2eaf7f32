"""Workflow learning over the live HTTP API: the registry (admins change it), dispatch, the queue
and the report, with a scripted model server on loopback."""


def test_workflows_over_http(service, llm_server):
    models = llm_server
    with service.client("admin") as admin, service.client("alice") as alice, service.client("bob") as bob:
        frontier = {
            "name": "http-frontier",
            "layer": "frontier",
            "provider": "openai",
            "model": "frontier-h",
            "endpoint": f"{models}/v1",
            "cost_in_per_1k": 0.01,
            "cost_out_per_1k": 0.03,
        }
        r = alice.post("/v1/workflows/agents", json=frontier)
        assert r.status_code == 403, r.text  # changing the registry is for admins
        r = admin.post("/v1/workflows/agents", json=frontier)
        assert r.status_code == 201, r.text
        assert admin.post("/v1/workflows/agents", json=frontier).status_code == 400  # exists
        bad = admin.post("/v1/workflows/agents", json={**frontier, "name": "x", "endpoint": "ftp://nope"})
        assert bad.status_code == 400 and "http" in bad.json()["error"]["message"]
        names = [a["name"] for a in alice.get("/v1/workflows/agents").json()["agents"]]
        assert "http-frontier" in names

        assert alice.post("/v1/namespaces", json={"name": "wf"}).status_code == 201  # its own: others count proj
        task = {
            "namespace": "wf",
            "task_type": "json",
            "description": "Extract the invoice number, total and currency as JSON: invoice 4242 from Acme totals 99.50 EUR.",
        }
        r = alice.post("/v1/workflows/dispatch", json=task)
        assert r.status_code == 200, r.text
        body = r.json()
        assert (
            body["route"] == "frontier" and body["agents"] == ["http-frontier"] and '"invoice": 4242' in body["output"]
        )
        assert body["cost_usd"] > 0
        assert bob.post("/v1/workflows/dispatch", json=task).status_code == 403  # no write access to wf
        assert alice.post("/v1/workflows/dispatch", json={**task, "task_type": "yaml"}).status_code == 400
        assert alice.post("/v1/workflows/dispatch", json={**task, "surprise": 1}).status_code == 422

        queued = alice.post("/v1/workflows/queue", json={**task, "priority": 7})
        assert queued.status_code == 202 and queued.json()["status"] == "pending"
        qid = queued.json()["id"]
        assert alice.get(f"/v1/workflows/queue/{qid}").json()["priority"] == 7
        assert bob.get(f"/v1/workflows/queue/{qid}").status_code == 404

        report = alice.get("/v1/workflows/report").json()
        assert report["tasks"]["frontier"] >= 1 and report["cost_usd"]["frontier"] > 0
        assert bob.get("/v1/workflows/report").json()["tasks"]["done"] == 0  # bob reads nothing of wf

        down = admin.patch("/v1/workflows/agents/http-frontier", json={"model": "down-h"})
        assert down.status_code == 200 and down.json()["model"] == "down-h"
        failed = alice.post("/v1/workflows/dispatch", json={**task, "description": task["description"] + " Again."})
        assert failed.status_code == 502 and failed.json()["error"]["type"] == "model_failed"
        admin.patch("/v1/workflows/agents/http-frontier", json={"active": False})
        none = alice.post("/v1/workflows/dispatch", json=task)
        assert none.status_code == 500 and "no active frontier model" in none.json()["error"]["message"]


async def test_workflow_dispatch_as_an_mcp_tool_through_the_service(service, llm_server):
    from tests.conftest import cli_env
    from tests.mcp_helpers import call, call_error, http_session, stdio_session

    with service.client("admin") as admin, service.client("alice") as alice:
        model = {
            "name": "mcp-frontier",
            "layer": "frontier",
            "provider": "openai",
            "model": "frontier-mcp",
            "endpoint": f"{llm_server}/v1",
            "cost_in_per_1k": 0.01,
            "cost_out_per_1k": 0.03,
        }
        assert admin.post("/v1/workflows/agents", json=model).status_code == 201
        assert alice.post("/v1/namespaces", json={"name": "wf-mcp"}).status_code == 201
    task = "Extract the invoice number, total and currency as JSON: invoice 808 from Acme totals 12.00 EUR."
    env = cli_env(api_url=service.url)
    try:
        # stdio in remote mode (through the HTTP API), and streamable HTTP at /mcp (in the ingress)
        async with (
            stdio_session({**env, "CABRAIN_API_KEY": service.keys["alice"]}) as remote,
            http_session(service.url, service.keys["alice"]) as direct,
            http_session(service.url, service.keys["bob"]) as bob,
        ):
            for session in (remote, direct):
                done = await call(session, "workflow_dispatch", description=task, namespace="wf-mcp", task_type="json")
                assert done["route"] == "frontier" and done["agents"] == ["mcp-frontier"]
                assert '"invoice": 808' in done["output"]
            assert "may not write" in await call_error(bob, "workflow_dispatch", description=task, namespace="wf-mcp")
    finally:
        with service.client("admin") as admin:
            admin.patch("/v1/workflows/agents/mcp-frontier", json={"active": False})
