"""The routes of the HTTP API, one router per area; :func:`cabrain.serve.api.create_api` includes
them in this order (the order of the OpenAPI document)."""
