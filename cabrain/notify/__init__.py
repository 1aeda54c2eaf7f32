"""Notifications: what CaBrain sends out to people and systems when something happens.

:mod:`cabrain.notify.senders` speaks each platform's wire format (Slack, WhatsApp, Nextcloud Talk,
Web Push, signed webhooks).
"""
