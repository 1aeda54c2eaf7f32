"""Re-export of :mod:`cabrain.serve.args`."""

from cabrain.serve.args import AppArgs, Autoscaling, DeploymentArgs, EmbedderArgs, IngressArgs, RerankerArgs

__all__ = ["AppArgs", "Autoscaling", "DeploymentArgs", "EmbedderArgs", "IngressArgs", "RerankerArgs"]
