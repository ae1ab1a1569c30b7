"""Library-created ``attrgetter``/``methodcaller`` instances replaced by plain functions.

The user's ``operator`` is a guarded copy whose getters are plain functions (see
``_child.make_guarded_operator``), but libraries create the real C ones, and the class of any
real instance builds new getters with any name, in C, where no run-time guard sees the lookup:
on Python 3.10 and 3.11 ``type(pathlib.PurePath.drive.fget)("__globals__")`` reads a
library function's globals and, through them, the real builtins. The classes are immutable
types, so the instances are replaced where libraries keep them: module globals, class
attributes and the accessors of properties, in every module loaded when the guards are
installed and after each import the user's code makes. A replacement calls the real instance
and behaves the same (a class attribute stays a non-binding callable).

Not covered: instances a library keeps in instance attributes, closures or containers (none in
the standard modules the policy allows; a third-party module can), which the kernel layers
still confine.
"""

from __future__ import annotations

import operator
import sys

# Executed by the bootstrap in the child's namespace, before pysandbox.child._main: no ``typing``
# import (start-up cost); mypy treats this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = ["clean_loaded_modules", "guard_imports", "is_real_getter", "replace_library_getters"]

_REAL_GETTER_TYPES: tuple[type, ...] = (operator.attrgetter, operator.methodcaller)
#: Names of the modules already cleaned in this process: the warm zygote cleans what it loaded
#: (its preload too) once, before forking, so each child scans only what it loads itself.
_GETTERS_CLEANED: set[str] = set()


def is_real_getter(value: object) -> bool:
    """Whether ``value`` is an instance of the real C ``attrgetter``/``methodcaller``.

    The classes cannot be subclassed, so the exact type is asked (``isinstance`` would consult
    a ``__class__`` an object may fake, and costs more over whole modules).
    """
    return type(value) in _REAL_GETTER_TYPES


def _plain(real: Callable[[Any], Any]) -> Callable[..., Any]:
    """A plain function calling ``real``: its class (``function``) builds no getter."""

    def call(obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        return real(obj, *args, **kwargs)

    call.__doc__ = f"{real!r}, as a plain function (pysandbox)"
    return call


def _replace_in_class(cls: type) -> int:
    replaced = 0
    for name, value in list(vars(cls).items()):
        new: Any = None
        if is_real_getter(value):
            new = staticmethod(_plain(value))  # a class attribute stays non-binding
        elif issubclass(type(value), property) and any(
            is_real_getter(f) for f in (value.fget, value.fset, value.fdel)
        ):
            accessors: list[Any] = [value.fget, value.fset, value.fdel]
            fget, fset, fdel = (_plain(f) if is_real_getter(f) else f for f in accessors)
            new = property(fget, fset, fdel, value.__doc__)
        if new is not None:
            try:
                setattr(cls, name, new)
            except (TypeError, AttributeError):  # an immutable (C) type: nothing to replace
                continue
            replaced += 1
    return replaced


def replace_library_getters(modules: Iterable[Any]) -> int:
    """Replace the real getters kept in ``modules``' globals, classes and properties.

    Args:
        modules: Module objects (anything else is skipped).

    Returns:
        How many attributes were replaced.
    """
    module_type = type(sys)
    replaced = 0
    classes: set[int] = set()

    def visit(cls: type) -> int:
        if id(cls) in classes:
            return 0
        classes.add(id(cls))
        return _replace_in_class(cls)

    for module in modules:
        if not isinstance(module, module_type):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if is_real_getter(value):
                namespace[name] = _plain(value)
                replaced += 1
            elif issubclass(type(value), type):
                replaced += visit(value)
                for inner in list(vars(value).values()):
                    if issubclass(type(inner), type):
                        replaced += visit(inner)
    return replaced


def clean_loaded_modules() -> int:
    """Clean every module loaded now, once per process; later calls clean only new ones.

    The warm zygote calls it after its preload, so a forked child inherits clean modules and
    the names already looked at (a scan of a preloaded data-science stack costs tens of
    milliseconds; a child would pay it on every run).

    Returns:
        How many attributes were replaced.
    """
    fresh = [name for name in list(sys.modules) if name not in _GETTERS_CLEANED]
    _GETTERS_CLEANED.update(fresh)
    return replace_library_getters(sys.modules.get(name) for name in fresh)


def guard_imports(
    user_import: Callable[..., Any], *, on_load: Callable[[Any], None] | None = None
) -> Callable[..., Any]:
    """Wrap the user's ``__import__`` so that modules loaded since the last look are cleaned.

    Also cleans every module loaded when it is called (the guards' installation).

    Args:
        user_import: The import guard bound into the user's builtins.
        on_load: Called with ``sys.modules`` whenever new modules were found (other guards
            that patch a module once it is loaded, such as ``sqlite3.connect``).

    Returns:
        An ``__import__`` with the same behaviour.
    """
    modules = sys.modules
    seen: set[str] = set(_GETTERS_CLEANED)  # cleaned before the fork (the zygote)

    def clean() -> None:
        fresh = [name for name in list(modules) if name not in seen]
        if not fresh:
            return
        seen.update(fresh)
        replace_library_getters(modules.get(name) for name in fresh)
        if on_load is not None:
            on_load(modules)

    clean()
    if on_load is not None:  # modules loaded before the fork (the zygote's) are not fresh here
        on_load(modules)

    def __import__(
        name: Any, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        module = user_import(name, globals, locals, fromlist, level)
        clean()
        return module

    return __import__
