"""How the check's tests import the delivered code: never here, always from the product process.

`ProductFinder` stands first on `sys.meta_path` of the checking process. For every import it finds the
module as this process would; when that is a file of the check's snapshot that is not one of the
session's own (its test files, the task's conftest), it hands back a `ProductModule` instead: an empty
module here whose attributes are asked of the product process, which imported the module itself, as a
plain `python -c "import ..."` in the workspace would (a module found in a folder of the workspace the
tests' configuration put on `sys.path`, `src/` say, is imported with that folder on the product's path
too). Packages keep their folders as `__path__`, so a submodule is found (and proxied) the same way; a
namespace folder holds no code and is imported here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import types
from collections.abc import Callable, Sequence
from typing import Any

from pse.product._remote import Remote

__all__ = ["ProductFinder", "ProductModule"]

_LOCAL = frozenset({"__spec__", "__loader__", "__file__", "__path__", "__package__", "__cached__", "__all__"})
"""A module's attributes the import system sets: kept here, not sent to the product."""


class ProductModule(types.ModuleType):
    """A delivered module as a test holds it: attributes not set here are the product module's."""

    def __getattr__(self, name: str) -> Any:
        remote = self.__dict__.get("_pse_remote")
        if remote is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return getattr(remote, name)

    def __setattr__(self, name: str, value: object) -> None:
        remote = self.__dict__.get("_pse_remote")
        if remote is None or name in _LOCAL or name == "_pse_remote" or isinstance(value, types.ModuleType):
            super().__setattr__(name, value)  # the import machinery's, and submodules imported here
        else:
            self.__dict__.pop(name, None)
            setattr(remote, name, value)  # a test's monkeypatch reaches the product

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__:
            super().__delattr__(name)
        else:
            delattr(self.__dict__["_pse_remote"], name)

    def __dir__(self) -> list[str]:
        remote = self.__dict__.get("_pse_remote")
        return sorted(set(self.__dict__) | set(dir(remote) if remote is not None else ()))


class ProductFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds modules as this process would, and proxies those the product must import.

    Args:
        roots: the snapshot's folders as this process sees them (the workspace's first: the product's
            current folder is the same files).
        native: the files imported here (the session's own tests and the task's conftest), real paths.
        ask: a request to the product (`Product.ask`).
        imported: called with (module name, its file relative to the workspace or None) per import.
    """

    def __init__(
        self,
        roots: Sequence[str],
        native: frozenset[str],
        ask: Callable[..., object],
        imported: Callable[[str, str | None], None],
    ) -> None:
        self._roots = [os.path.realpath(r) for r in roots]
        self._native, self._ask, self._imported = native, ask, imported

    def inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root + os.sep) for root in self._roots)

    def is_product(self, path: str) -> bool:
        """A file of the snapshot that is not the session's own: code that runs only in the product
        (`<string>` and other names that are no file are not)."""
        return self.inside(path) and os.path.isfile(path) and os.path.realpath(path) not in self._native

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.has_location or not spec.origin or not self.is_product(spec.origin):
            return None  # not the snapshot's, or a namespace folder, or the session's own: imported here
        package = spec.submodule_search_locations is not None
        proxied = importlib.machinery.ModuleSpec(fullname, self, is_package=package)
        if spec.submodule_search_locations is not None:
            proxied.submodule_search_locations = list(spec.submodule_search_locations)
        if path is None:  # a top-level module: the folder of sys.path it was found in, for the product too
            entry = os.path.dirname(os.path.dirname(spec.origin) if package else spec.origin)
            proxied.loader_state = os.path.relpath(os.path.realpath(entry), self._roots[0])
        return proxied

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return ProductModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        spec = module.__spec__
        entry = spec.loader_state if spec is not None and isinstance(spec.loader_state, str) else "."
        answer = self._ask("import", module.__name__, entry)
        if not (isinstance(answer, tuple) and len(answer) == 4 and type(answer[0]) is Remote):
            raise ImportError(f"the product answered the import of {module.__name__} with no module")
        remote, file, _package, names = answer
        module.__dict__["_pse_remote"] = remote
        plain = type(file) is str and file and not os.path.isabs(file) and ".." not in file.split(os.sep)
        relative = file if plain else None
        if relative is not None:
            module.__file__ = os.path.join(self._roots[0], relative)
        if type(names) is list and all(type(n) is str for n in names):
            module.__dict__["__all__"] = names  # what `from module import *` takes
        self._imported(module.__name__, relative)
