"""Ray Serve applications for CaBrain (the HTTP ingress and the model deployments).

The applications land with the service issue; this package is declared now so that the
distribution layout (``cabrain``, ``serve_apps``, ``jobs``) is fixed from the first release.
"""
