"""The CaBrain Serve application: ingress -> embedder (+ reranker), composed through handles.

``import_path: cabrain.serve.app:build_app`` (or ``serve_apps.app:build_app``, its re-export in a
checkout) in a Serve config file; ``args`` are :class:`cabrain.serve.args.AppArgs`. ``cabrain up``
calls :func:`build_app` directly.
"""

# No ``from __future__ import annotations``: Serve reads build_app's annotation to validate args.
from ray.serve import Application

from cabrain.errors import ConfigError
from cabrain.serve.args import AppArgs
from cabrain.serve.ingress import Ingress
from cabrain.serve.models import EmbedderDeployment, RerankerDeployment
from cabrain.settings import RerankerProvider, load_settings


def build_app(args: AppArgs) -> Application:
    """Check the settings once here (a bad value fails the deploy, not every replica) and bind."""
    if not isinstance(args, AppArgs):
        args = AppArgs.model_validate(args)
    settings = load_settings(**args.settings)
    if settings.embedded:
        raise ConfigError(
            "the Serve application needs the hot tier's URL: replicas on other nodes cannot share an embedded database",
            hint="set settings.database_url in the Serve config (cabrain up fills it in for a local run)",
        )
    wanted = args.reranker.enabled
    if wanted is None:
        wanted = settings.reranker_provider is not RerankerProvider.NONE
    elif wanted and settings.reranker_provider is RerankerProvider.NONE:
        raise ConfigError(
            "reranker.enabled is true but no reranker is configured",
            hint="set settings.reranker_provider (cross-encoder or http) and settings.reranker_model",
        )
    overrides = dict(args.settings)
    embedder = EmbedderDeployment.options(**args.embedder.options(), user_config=args.embedder.user_config()).bind(
        overrides
    )
    reranker = RerankerDeployment.options(**args.reranker.options()).bind(overrides) if wanted else None
    local = args.local_query_embedding(settings.embedding_provider.value, settings.embedding_device)
    return Ingress.options(**args.ingress_options(local)).bind(overrides, embedder, reranker, local)
