"""Re-export of :mod:`cabrain.serve.app` (``import_path: serve_apps.app:build_app``)."""

from cabrain.serve.app import build_app

__all__ = ["build_app"]
