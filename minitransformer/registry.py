"""The package's own model classes, declared where they are defined.

A model module marks each class that a checkpoint may rebuild with
``@register_model(ConfigClass)``; :func:`minitransformer.training.checkpoint.build_model`
looks a checkpoint's ``model_class`` up in :data:`MODELS` and builds nothing
else: no name a file gives is ever imported. The package's ``__init__``
imports every model module, so the registry is complete once
``minitransformer`` is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["MODELS", "qualified_name", "register_model"]

ModelClass = TypeVar("ModelClass", bound=type)

#: ``"module:Class"`` of a model → (the model class, its config class).
MODELS: dict[str, tuple[type, type]] = {}


def qualified_name(cls: type) -> str:
    """``"module:Class"``: how a checkpoint names a class."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_model(config_cls: type) -> Callable[[ModelClass], ModelClass]:
    """Class decorator: add the model class, built as ``cls(config_cls(**d))``,
    to :data:`MODELS`; returns the class unchanged."""

    def register(cls: ModelClass) -> ModelClass:
        MODELS[qualified_name(cls)] = (cls, config_cls)
        return cls

    return register
