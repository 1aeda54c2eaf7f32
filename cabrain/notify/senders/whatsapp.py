"""WhatsApp: a notice sent as a text message through the WhatsApp Cloud API (Meta's Graph API).

``POST {base_url}/{api_version}/{phone_number_id}/messages`` with ``Authorization: Bearer <token>``
(a system user's access token with ``whatsapp_business_messaging``). Config::

    {"base_url": "https://graph.facebook.com", "api_version": "v21.0",
     "phone_number_id": "106540352242922", "timeout_s": 10}

A target is ``{"to": "+4915112345678"}``, optionally with ``phone_number_id`` (sending from another
business number than the config's) and ``message_id``: the ``wamid`` of a message in the
conversation, which the notice then answers as a contextual reply (the quoted bubble). Link
previews are on. The message id answered is the ``wamid`` Meta gives the sent message.

Graph errors are ``{"error": {"message", "type", "code", "error_subcode", "error_data",
"fbtrace_id"}}``: a refused token (HTTP 401 or code 190) is not retried; the rate limits (HTTP 429,
codes 4, 80007, 130429, 131048, 131056) and server errors (5xx, codes 1, 2, 131000, 131016, 133004)
are, after any ``Retry-After``. Note that a business may only send free text within 24 hours of the
user's last message (code 131047 otherwise): notices reach those who wrote to the number lately.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from cabrain.clock import Clock, utc_now
from cabrain.egress import Egress
from cabrain.notify.senders import DeliveryError, Notice, clip, need_secret, required
from cabrain.notify.senders.http import client, post, refused

__all__ = ["KIND", "WhatsAppSender", "build"]

KIND = "whatsapp"
MAX_TEXT = 4096  # a text message's body
TOKEN_CODES = {190, 102}
RETRY_CODES = {1, 2, 4, 80007, 130429, 131000, 131016, 131048, 131056, 133004}
TOKEN_HINT = (
    "give a WhatsApp Cloud API access token (a system user's, with whatsapp_business_messaging); "
    "temporary tokens from the app dashboard expire after 24 hours"
)
HINTS = {
    10: "the token lacks the whatsapp_business_messaging permission for this phone number",
    200: "the token lacks the whatsapp_business_messaging permission for this phone number",
    100: "check the phone_number_id and the recipient's number (international format)",
    131030: "in development mode, add the recipient to the app's allowed test numbers",
    131047: "more than 24 hours passed since the recipient last wrote: WhatsApp only takes template messages now",
    131026: "the recipient cannot receive this message (no WhatsApp account, or an old app)",
}


class WhatsAppSender:
    kind = KIND

    def __init__(self, config: Mapping[str, Any], secret: str | None, egress: Egress) -> None:
        self.token = need_secret(KIND, secret, "a WhatsApp Cloud API access token")
        self.base_url = str(config.get("base_url", "https://graph.facebook.com")).rstrip("/")
        self.api_version = str(config.get("api_version", "v21.0"))
        self.phone_number_id = config.get("phone_number_id")
        self.http = client(config, egress)

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        to = required(target, "to", KIND)
        number = target.get("phone_number_id") or self.phone_number_id
        if not number:
            raise DeliveryError(
                "a WhatsApp destination needs the business phone number's id",
                retry=False,
                hint="set phone_number_id in the destination's config (WhatsApp Manager › API setup)",
            )
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"body": clip(notice.text, MAX_TEXT), "preview_url": True},
        }
        if target.get("message_id"):
            body["context"] = {"message_id": str(target["message_id"])}
        url = f"{self.base_url}/{quote(self.api_version)}/{quote(str(number), safe='')}/messages"
        what = f"WhatsApp message to {to}"
        response = await post(self.http, url, what=what, json=body, headers={"Authorization": f"Bearer {self.token}"})
        if response.status_code != 200:
            raise _refused(response, what)
        try:
            return str(response.json()["messages"][0]["id"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise DeliveryError(
                f"{what}: the Graph API answered 200 without a message id", retry=False, status_code=200
            ) from exc

    async def aclose(self) -> None:
        await self.http.aclose()


def _refused(response: httpx.Response, what: str) -> DeliveryError:
    """The Graph error in the answer, classified by its code where it has one."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    data = error.get("error_data")
    details = data.get("details") if isinstance(data, dict) else None
    detail = " ".join(str(s) for s in (error.get("message"), details) if s)
    if code is not None:
        sub = f", subcode {error['error_subcode']}" if error.get("error_subcode") is not None else ""
        detail = f"{detail} (code {code}{sub})".strip()
    if response.status_code == 401 or code in TOKEN_CODES:
        return refused(response, what, detail=detail, hint=TOKEN_HINT, retry=False)
    hint = HINTS.get(code) if isinstance(code, int) else None
    return refused(response, what, detail=detail, hint=hint, retry=True if code in RETRY_CODES else None)


def build(config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress) -> WhatsAppSender:
    return WhatsAppSender(config, secret, egress)
