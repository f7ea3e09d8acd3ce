"""The graded checks of a submission run with the code they had before the submission ran.

``flkit course grade`` runs one cell of its own before a submission's first cell:
``install(token, modules)`` imports the checker modules the hidden tests name and keeps what
they and everything loaded by then are made of (:func:`snapshot`), then puts a graded ``require``
under the name ``token`` (random per grading) in the kernel's builtins. Each hidden test calls
that ``require`` with the checker's module and name (``nbgrader_run`` rewrites the hidden tests
so): it swaps the kept code back in for everything the submission changed since
(:func:`swap_in`), runs the checker taken from the kept copy, then swaps the submission's
versions back (:func:`swap_back`), so the grading itself changes nothing later cells see.
Replacing ``exercise.check_x``, ``flkit.course.require``, ``Verdict.__bool__``, ``math.isclose``
or ``torch.allclose``, or a checker's code, therefore changes no grade. What was changed in flkit,
``builtins`` or ``math`` is reported on the check cell's stdout (``REPORT`` then the names;
stdout, since nbgrader gives no points to a check that writes to stderr), which the grader turns
into a note in grades.csv; the other libraries are swapped silently, since they rebind their own
functions as they load more of themselves (torch wraps ``torch.manual_seed`` when its compiler
loads).

What is kept: in the checker modules (and ``flkit.course.checks``) every global, containers'
contents included; in every other flkit module and in builtins, math, io, contextlib, functools,
operator, torch, torch.nn.functional and numpy, what is callable (functions, classes); the
methods of the Python classes among them; the code and defaults of flkit's functions. What is
not: other data (a tensor changed in place, another module's settings), modules first imported
after this cell, and whatever reaches the interpreter itself (the kernel's builtins, its input
and exception handlers, the objects kept here): :mod:`.tampering` flags submissions that use the
means to (docs/TEACHING.md says what is and is not protected).
"""

from __future__ import annotations

import builtins
import copy
import importlib
import sys
import types

__all__ = ["install", "snapshot", "swap_in", "swap_back", "REPORT", "THIRD_PARTY", "REPORTED"]

#: the first words of the line a graded check writes to stdout when it swapped something back
REPORT = "flkit grader: tampering:"
#: builtins the kernel itself replaces (ipykernel points ``input`` at the front end per cell)
KERNEL_BUILTINS = frozenset({"input"})
#: modules outside flkit whose callables the checkers compute with
THIRD_PARTY = (
    "builtins",
    "math",
    "io",
    "contextlib",
    "functools",
    "operator",
    "torch",
    "torch.nn.functional",
    "numpy",
)
#: the modules outside flkit whose changes are reported: no library rebinds what they hold
REPORTED = ("builtins", "math")
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class whose attributes Python code can replace
_DESCRIPTORS = (staticmethod, classmethod, property)


def _kept(value, data: bool) -> bool:
    return data or callable(value) or isinstance(value, _DESCRIPTORS)


def _frozen(value):
    """A deep copy of a container's contents (None when it cannot be copied and compared)."""
    if not isinstance(value, (dict, list, set)):
        return None
    try:
        frozen = copy.deepcopy(value)
        bool(frozen == value)
    except Exception:  # noqa: BLE001 - tensors inside: not compared
        return None
    return frozen


def snapshot(checker_modules) -> list[tuple]:
    """What :func:`swap_in` puts back, as entries ``(kind, name, holder, key, value, extra,
    reported)``."""
    entries: list[tuple] = []
    seen_classes: set[int] = set()

    def from_class(cls, name: str, told: bool) -> None:
        if id(cls) in seen_classes or not cls.__flags__ & _HEAP_TYPE:
            return
        seen_classes.add(id(cls))
        for key, value in list(vars(cls).items()):
            if key in ("__dict__", "__weakref__", "__doc__") or not _kept(value, False):
                continue
            entries.append(("class", f"{name}.{key}", cls, key, value, None, told))
            func = getattr(value, "__func__", value)
            if isinstance(func, types.FunctionType) and func.__module__.startswith("flkit"):
                code = (func.__code__, func.__defaults__, func.__kwdefaults__)
                entries.append(("code", f"{name}.{key}", func, None, code, None, told))
            if isinstance(value, type) and value.__module__ == cls.__module__:
                from_class(value, f"{name}.{key}", told)

    flkit = sorted(m for m in sys.modules if m == "flkit" or m.startswith("flkit."))
    for modname in [*THIRD_PARTY, *flkit]:  # builtins first: see swap_in
        module = sys.modules.get(modname)
        if module is None:
            continue
        data = modname in checker_modules
        told = modname in REPORTED or modname.startswith("flkit")
        d = vars(module)
        for key, value in list(d.items()):
            if key.startswith("__") or isinstance(value, types.ModuleType):
                continue  # the module's own machinery (__builtins__, __spec__, ...) and imports
            if not _kept(value, data):
                continue
            if modname == "builtins" and (
                key in KERNEL_BUILTINS
                or key.startswith("_")  # the last results shown (_, __, ___)
                or not isinstance(value, (types.BuiltinFunctionType, type))
            ):
                continue  # the kernel's own (display, get_ipython, exit, help) are not checked
            frozen = _frozen(value) if data else None
            entries.append(("global", f"{modname}.{key}", d, key, value, frozen, told))
            if isinstance(value, types.FunctionType) and value.__module__ == modname:
                code = (value.__code__, value.__defaults__, value.__kwdefaults__)
                entries.append(("code", f"{modname}.{key}", value, None, code, None, told))
            if isinstance(value, type) and value.__module__ == modname:
                from_class(value, f"{modname}.{key}", told)
        if modname.startswith("flkit"):  # a global added there shadows a builtin
            entries.append(("names", modname, d, None, frozenset(d), None, told))
    return entries


_MISSING = object()


def swap_in(entries, set_attr=type.__setattr__):
    """Put the kept values back wherever they changed since :func:`snapshot`: (the reported
    names of what had changed, what :func:`swap_back` needs to undo it). Builtins come first in
    the entries and a global is swapped with plain dict operations, so a replaced builtin is back
    before the rest of the work looks one up."""
    changed, undo = [], []
    for kind, name, holder, key, value, extra, told in entries:
        said = name
        if kind == "global":
            now = holder.get(key, _MISSING)
            if now is not value:
                holder[key] = value
                undo.append(("global", holder, key, now))
            elif extra is not None:
                try:
                    same = bool(value == extra)
                except Exception:  # noqa: BLE001 - what cannot be compared now has changed
                    same = False
                if same:
                    continue
                undo.append(("contents", value, None, copy.copy(value)))
                value.clear()
                if isinstance(value, list):
                    value.extend(copy.deepcopy(extra))
                else:
                    value.update(copy.deepcopy(extra))
                said = f"{name} (its contents)"
            else:
                continue
        elif kind == "class":
            now = holder.__dict__.get(key, _MISSING)
            if now is value:
                continue
            set_attr(holder, key, value)
            undo.append(("class", holder, key, now))
        elif kind == "code":
            now = (holder.__code__, holder.__defaults__, holder.__kwdefaults__)
            if all(a is b for a, b in zip(now, value)):
                continue
            holder.__code__, holder.__defaults__, holder.__kwdefaults__ = value
            undo.append(("code", holder, None, now))
            said = f"{name} (its code)"
        elif kind == "names":
            added = [
                k for k in holder if k not in value and not isinstance(holder[k], types.ModuleType)
            ]
            for k in added:  # a kept module that gained a global: it may shadow a builtin
                undo.append(("global", holder, k, holder.pop(k)))
                if told:
                    changed.append(f"{name}.{k} (added)")
            continue
        if told:
            changed.append(said)
    return changed, undo


def swap_back(undo, set_attr=type.__setattr__, del_attr=type.__delattr__) -> None:
    """Undo :func:`swap_in`: the submission's own versions, as they were before the check."""
    for kind, holder, key, now in reversed(undo):
        if kind == "global":
            if now is _MISSING:
                holder.pop(key, None)
            else:
                holder[key] = now
        elif kind == "contents":
            holder.clear()
            if isinstance(holder, list):
                holder.extend(now)
            else:
                holder.update(now)
        elif kind == "class":
            if now is _MISSING:
                del_attr(holder, key)
            else:
                set_attr(holder, key, now)
        elif kind == "code":
            holder.__code__, holder.__defaults__, holder.__kwdefaults__ = now


def install(token: str, modules) -> None:
    """Import ``modules`` (the checkers' modules), keep what they use, and put the graded
    ``require(module, name, *args)`` into builtins as ``token``."""
    modules = [*modules, "flkit.course.checks"]
    for name in modules:
        importlib.import_module(name)
    held = {name: dict(vars(sys.modules[name])) for name in modules}
    checks_require = held["flkit.course.checks"]["require"]
    stdout = sys.stdout  # the kernel's stream of the cell output, kept from before
    found: list[str] = []
    entries: list[tuple] = []

    def require(module: str, name: str, *args, **kwargs) -> None:
        """The graded test: the kept checker under the kept ``flkit.course.require``, with
        the kept code swapped in for what the submission changed."""
        changed, undo = swap_in(entries)
        try:
            found.extend(n for n in changed if n not in found)
            if found:  # said at every check, so each check cell's note has it
                more = " ..." if len(found) > 20 else ""
                stdout.write(f"{REPORT} {', '.join(found[:20])}{more}\n")
            checks_require(held[module][name], *args, **kwargs)
        finally:
            swap_back(undo)

    setattr(builtins, token, require)
    entries.extend(snapshot(set(modules)))
