"""The egress policy through the running service (issue 31, findings 5 and 9). The service may reach
127.0.0.1 (CABRAIN_EGRESS_ALLOW, where the tests' stand-ins listen) and read the credentials the
tests list (CABRAIN_SECRET_ENV_ALLOW); everything else outside the public internet is refused.

- Finding 5 replayed: a non-admin subscriber names a loopback server as a Talk ``backend`` or a web
  push ``endpoint``; the server never sends there, even to the one loopback address it may reach.
- An admin's URL to another loopback, link-local (metadata) or private address is refused with a
  403 that names CABRAIN_EGRESS_ALLOW, for notifiers, subscriptions, connectors and models.
- Finding 9: a variable that is not listed, or is one of CaBrain's own, is refused as a credential.
"""

from __future__ import annotations

from typing import Any

from tests.recorder import recording
from tests.service.conftest import Service

REFUSED_URLS = ("http://127.0.0.2:8080", "http://[::1]:8080", "http://169.254.169.254", "http://10.0.0.1")


def _error(answer: Any) -> dict[str, Any]:
    return answer.json()["error"]


def test_a_non_admin_cannot_make_the_server_send_to_loopback(service: Service) -> None:
    with (
        recording("127.0.0.1") as target,
        service.client("admin") as admin,
        service.client("alice") as alice,
    ):
        talk = {"url": "https://cloud.example.com"}
        made = admin.post(
            "/v1/notifiers",
            json={"name": "egress-talk", "kind": "talk", "config": talk, "secret_env": "GATE_SLACK_SIGNING"},
        )
        assert made.status_code == 201, made.text
        push = {"vapid_subject": "mailto:ops@example.com", "allow_http": True}
        made = admin.post(
            "/v1/notifiers",
            json={"name": "egress-push", "kind": "webpush", "config": push, "secret_env": "GATE_WA_TOKEN"},
        )
        assert made.status_code == 201, made.text
        ask = {"subscriber": "alice", "kinds": ["contradiction"], "namespace": "proj"}

        backend = alice.post(
            "/v1/subscriptions",
            json={**ask, "notifier": "egress-talk", "target": {"room": "r0om", "backend": target.url}},
        )
        assert backend.status_code == 403, backend.text
        assert "its notifier's Nextcloud only" in _error(backend)["message"]
        browser = {"endpoint": f"{target.url}/push/alice", "keys": {"p256dh": "BPk", "auth": "a1"}}
        endpoint = alice.post("/v1/subscriptions", json={**ask, "notifier": "egress-push", "target": browser})
        assert endpoint.status_code == 403, endpoint.text
        assert "not a push service" in _error(endpoint)["message"]
        # a browser's endpoint on a push service, and a Talk target without a server of its own, are hers to give
        service_endpoint = {**browser, "endpoint": "https://fcm.googleapis.com/fcm/send/dGVzdA"}
        fine = alice.post("/v1/subscriptions", json={**ask, "notifier": "egress-push", "target": service_endpoint})
        assert fine.status_code == 201, fine.text
        room = alice.post("/v1/subscriptions", json={**ask, "notifier": "egress-talk", "target": {"room": "r0om"}})
        assert room.status_code == 201, room.text

        mine = alice.get("/v1/subscriptions").json()["subscriptions"]
        assert not any(target.url in str(s["target"]) for s in mine)  # nothing partial was stored
        assert target.seen == []
        for made in (fine.json(), room.json()):
            assert alice.delete(f"/v1/subscriptions/{made['id']}").status_code == 200


def test_an_admin_url_outside_the_policy_is_refused_naming_the_setting(service: Service) -> None:
    with service.client("admin") as admin:
        for url in REFUSED_URLS:
            hook = admin.post(
                "/v1/notifiers",
                json={
                    "name": "egress-hook",
                    "kind": "webhook",
                    "config": {"url": f"{url}/hook"},
                    "secret_env": "GATE_SLACK_SIGNING",
                },
            )
            assert hook.status_code == 403 and "CABRAIN_EGRESS_ALLOW" in _error(hook)["hint"], hook.text
            model = admin.post(
                "/v1/workflows/agents",
                json={"name": "egress-model", "layer": "local", "provider": "openai", "model": "m", "endpoint": url},
            )
            assert model.status_code == 403 and "CABRAIN_EGRESS_ALLOW" in _error(model)["hint"], model.text
            connector = admin.post(
                "/v1/connectors",
                json={
                    "name": "egress-gitlab",
                    "kind": "gitlab",
                    "namespace": "proj",
                    "config": {"url": url, "project": "a/b", "token_env": "GATE_GITLAB_TOKEN"},
                },
            )
            assert connector.status_code == 403 and "CABRAIN_EGRESS_ALLOW" in _error(connector)["hint"]
        # the address the operator listed is the admin's to use
        listed = admin.post(
            "/v1/notifiers",
            json={
                "name": "egress-hook",
                "kind": "webhook",
                "config": {"url": "http://127.0.0.1:9/hook"},
                "secret_env": "GATE_SLACK_SIGNING",
            },
        )
        assert listed.status_code == 201, listed.text
        assert admin.delete("/v1/notifiers/egress-hook").status_code == 200
        names = [n["name"] for n in admin.get("/v1/notifiers").json()["notifiers"]]
        models = [m["name"] for m in admin.get("/v1/workflows/agents").json()["agents"]]
        connectors = [c["name"] for c in admin.get("/v1/connectors").json()["connectors"]]
        assert "egress-hook" not in names and "egress-model" not in models and "egress-gitlab" not in connectors


def test_only_listed_variables_may_be_named_as_credentials(service: Service) -> None:
    with service.client("admin") as admin:
        for variable, status in (("AWS_SECRET_ACCESS_KEY", 403), ("PGPASSWORD", 403), ("CABRAIN_METRICS_KEY", 400)):
            model = admin.post(
                "/v1/workflows/agents",
                json={
                    "name": "egress-keyed",
                    "layer": "frontier",
                    "provider": "anthropic",
                    "model": "m",
                    "endpoint": "https://api.anthropic.com",
                    "api_key_env": variable,
                },
            )
            assert model.status_code == status and variable in _error(model)["message"], model.text
            if status == 403:
                assert "CABRAIN_SECRET_ENV_ALLOW" in _error(model)["hint"]
            notifier = admin.post(
                "/v1/notifiers",
                json={"name": "egress-slack", "kind": "slack", "config": {}, "secret_env": variable},
            )
            assert notifier.status_code == status, notifier.text
            channel = admin.post(
                "/v1/channels",
                json={"name": "egress-chan", "kind": "webhook", "namespace": "proj", "secret_env": variable},
            )
            assert channel.status_code == status, channel.text
