"""Re-export of :mod:`cabrain.serve.proxy` (``serve_apps.proxy:middlewares``)."""

from cabrain.serve.proxy import JsonErrors, middlewares

__all__ = ["JsonErrors", "middlewares"]
