"""Re-exports of :mod:`cabrain.serve`, CaBrain's Ray Serve application, for Serve config files and
commands run from a checkout (``import_path: serve_apps.app:build_app``,
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=serve_apps.proxy:middlewares``). The code lives in
the package, which an installed wheel has; this folder is not installed.
"""
