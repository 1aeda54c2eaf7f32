"""Local chat models CaBrain serves itself: GGUF weights (a file, or a package that carries them)
under llama.cpp's server on loopback, registered as local model agents with their measured speed
(``CABRAIN_LOCAL_MODELS``; :mod:`cabrain.localmodels.serve`)."""
