"""The contributor docs cannot drift from the code.

Every signature docs/ARCHITECTURE.md shows (a `def` or `class` line, a bare `name(params)` line or
inline span, a class body of fields, a constant's value) is compared with the real object:
parameter names, kinds and defaults through `inspect.signature`, dataclass fields through
`dataclasses.fields`. The object is looked up in the module a code block names on its first line
(`# flkit.engine`), else in the modules the section's heading names, else, when the name is defined
in exactly one flkit module, there. Every path and `flkit.` dotted name that ARCHITECTURE.md and
ADDING_A_PAPER.md mention must exist. A code block whose first line is `# example` shows usage and
is not read for signatures.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest

import flkit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ARCH = DOCS / "ARCHITECTURE.md"
PAGES = (ARCH, DOCS / "ADDING_A_PAPER.md")

PATH = re.compile(r"(?<![\w/.-])(?:flkit|tests|docs|benchmarks|notebooks|tools)/[\w./*<>-]*")
DOTTED = re.compile(r"^flkit(?:\.\w+)+$")
CALL_HEAD = re.compile(r"^(?:def\s+|class\s+)?([A-Za-z_][\w.]*)\s*\(")
CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*)\s*(?::[^=]+)?=\s*(.+)$", re.S)
ANNOTATED = re.compile(r"^([A-Za-z_]\w*)\s*:\s*(.+)$", re.S)


# --- reading the page -------------------------------------------------------------------------


@dataclasses.dataclass
class Shown:
    """One signature the page shows."""

    line: int
    kind: str  # "call", "fields", "constant", "name"
    name: str
    text: str  # params, fields or value as written
    returns: str | None
    modules: tuple[str, ...]  # where to look first
    exact: bool = False  # named by a block's marker: only there

    @property
    def id(self) -> str:
        return f"L{self.line} {self.name}"


def _module_of(path: str) -> str | None:
    """'flkit/engine/' or 'flkit/compress/codecs.py' or 'flkit.engine' -> an importable name."""
    path = path.strip().rstrip("/").rstrip(",;:")
    if path.startswith("flkit."):
        return path
    if not path.startswith("flkit"):
        return None
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _call(text: str):
    """(name, params, returns or None) of `name(params) -> returns`, or None."""
    text = text.strip()
    head = CALL_HEAD.match(text)
    if not head:
        return None
    depth, quote = 0, None
    for i in range(head.end() - 1, len(text)):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                rest = text[i + 1 :].strip().rstrip(":").strip()
                if rest and not rest.startswith("->"):
                    return None
                returns = rest[2:].strip() or None if rest else None
                return head[1], text[head.end() : i], returns
    return None


def _strip_comment(line: str) -> str:
    """The line without a trailing `# ...` (a `#` inside a string or brackets is kept)."""
    depth, quote = 0, None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "#" and depth <= 0:
            return line[:i].rstrip()
    return line.rstrip()


def _split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside brackets and strings."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _params(text: str) -> ast.arguments | None:
    """The parameter list `text` as Python would read it in a `def`, or None when it is a call
    with values (an example, not a signature)."""
    text = text.strip()
    if text.endswith("..."):
        text = text[:-3].rstrip().rstrip(",")
    try:
        fn = ast.parse(f"def _f({text}): pass").body[0]
    except SyntaxError:
        return None
    return fn.args


def _statements(block: list[tuple[int, str]]):
    """(line number, statement, indent) per logical statement of a code block."""
    buf, start, indent, depth = "", 0, 0, 0
    for n, raw in block:
        line = _strip_comment(raw)
        if not line.strip():
            continue
        if not buf:
            start, indent = n, len(line) - len(line.lstrip())
        buf += (" " if buf else "") + line.strip()
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        if depth <= 0:
            for part in _split_top(buf, ";"):
                yield start, part, indent
            buf, depth = "", 0


def _heading_modules(heading: str) -> tuple[str, ...]:
    mods = [_module_of(p) for p in re.findall(r"flkit[\w./]*", heading)]
    return tuple(m for m in mods if m)


def _from_block(block, modules) -> list[Shown]:
    shown: list[Shown] = []
    if block and block[0][1].strip() == "# example":
        return shown
    cls: Shown | None = None
    exact = dataclass_next = False
    for n, raw in block:  # a marker line names the module of what follows
        m = re.match(r"^\s*#\s*(flkit[\w./]*)\s*$", raw)
        if m and n == block[0][0]:
            modules, exact = (_module_of(m.group(1)),), True
    for n, stmt, indent in _statements(block):
        if stmt.startswith("@"):
            dataclass_next = stmt.startswith("@dataclass")
            continue
        if cls is not None and indent > 0:
            if stmt.startswith("def "):
                m = _call(stmt)
                if m:
                    shown.append(
                        Shown(n, "call", f"{cls.name}.{m[0]}", m[1], m[2], cls.modules, exact)
                    )
            else:
                cls.kind = "fields"
                cls.text += ("; " if cls.text else "") + stmt
            continue
        cls = None
        if stmt.startswith("class "):
            # `class X(params)` (no colon): how X is built; `class X:` then fields and methods;
            # `class X: a, b=1` on one line
            if m := re.match(r"^class\s+([A-Za-z_]\w*)\s*\((.*)\)\s*$", stmt):
                shown.append(Shown(n, "call", m[1], m[2], None, modules, exact))
            elif m := re.match(r"^class\s+([A-Za-z_]\w*)\s*(\(.*\))?\s*:\s*(.*)$", stmt):
                kind = "fields" if dataclass_next or m[3] else "class"
                cls = Shown(n, kind, m[1], m[3].replace(",", ";"), None, modules, exact)
                shown.append(cls)
            dataclass_next = False
            continue
        if m := CONSTANT.match(stmt):
            shown.append(Shown(n, "constant", m[1], m[2], None, modules, exact))
            continue
        if (m := _call(stmt)) and _params(m[1]) is not None:
            shown.append(Shown(n, "call", m[0], m[1], m[2], modules, exact))
            continue
        if (m := ANNOTATED.match(stmt)) and re.fullmatch(r"[A-Z_][A-Z0-9_]*", m[1]):
            shown.append(Shown(n, "name", m[1], "", None, modules, exact))
    return shown


def _from_prose(n: int, line: str, modules) -> list[Shown]:
    shown = []
    for span in re.findall(r"`([^`]+)`", line):
        m = _call(span)
        if m and _params(m[1]) is not None:
            shown.append(Shown(n, "call", m[0], m[1], m[2], modules))
    return shown


def shown_signatures(text: str) -> list[Shown]:
    """Every signature a page's markdown `text` shows."""
    shown: list[Shown] = []
    modules: tuple[str, ...] = ()
    block: list[tuple[int, str]] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if block is None:  # a python block is read; a shell or text block is skipped
                block = [] if line.strip() in ("```python", "```py") else "other"
            else:
                if block != "other":
                    shown += _from_block(block, modules)
                block = None
            continue
        if block is not None:
            if block != "other":
                block.append((n, line))
            continue
        if line.startswith("## "):
            modules = _heading_modules(line)
        shown += _from_prose(n, line, modules)
    return shown


# --- finding the object -----------------------------------------------------------------------


@cache
def _all_modules() -> dict[str, object]:
    found = {"flkit": flkit}
    for info in pkgutil.walk_packages(flkit.__path__, "flkit."):
        if info.name.endswith("__main__"):  # runs a command when imported
            continue
        try:
            found[info.name] = importlib.import_module(info.name)
        except Exception:  # an optional extra (ray) that is not installed
            continue
    return found


def _getattr_chain(obj, parts):
    for part in parts:
        obj = getattr(obj, part)
    return obj


def _with_submodules(mod: str) -> list[str]:
    return [mod] + sorted(m for m in _all_modules() if m.startswith(mod + "."))


def resolve(name: str, modules: tuple[str, ...], exact: bool = False):
    """The object `name` names; a lookup error says where it looked. `exact`: only in `modules`
    (a block's marker), never elsewhere."""
    parts = name.split(".")
    if parts[0] == "flkit":
        for cut in range(len(parts), 0, -1):
            mod = ".".join(parts[:cut])
            if mod in _all_modules():
                return _getattr_chain(_all_modules()[mod], parts[cut:])
        raise LookupError(f"{name}: no such module")
    for mod in modules:
        if mod not in _all_modules():
            raise LookupError(f"{name}: the page names module {mod}, which does not exist")
        try:  # a module's public face: whatever it holds, re-exports included
            return _getattr_chain(_all_modules()[mod], parts)
        except AttributeError as e:
            if exact:
                raise LookupError(f"{name}: {mod}.{name} does not exist ({e})") from None
        for sub in _with_submodules(mod)[1:]:  # inside a package: where the name is defined
            obj = vars(_all_modules()[sub]).get(parts[0])
            if obj is not None and getattr(obj, "__module__", sub) == sub:
                return _getattr_chain(obj, parts[1:])
    defined = {}
    for modname, mod in _all_modules().items():
        obj = vars(mod).get(parts[0])
        if inspect.ismodule(obj) or obj is None:
            continue
        if getattr(obj, "__module__", modname) == modname:
            defined[id(obj)] = (modname, obj)
    if len(defined) == 1:
        ((modname, obj),) = defined.values()
        try:
            return _getattr_chain(obj, parts[1:])
        except AttributeError as e:
            raise LookupError(f"{name}: {modname}.{parts[0]} has no {e.name}") from None
    where = ", ".join(modules) or "no module named by its section"
    many = f" (defined in {', '.join(m for m, _ in defined.values())})" if defined else ""
    raise LookupError(f"{name}: not found in {where}{many}; add a `# flkit.x` marker")


# --- comparing --------------------------------------------------------------------------------


_MISSING = object()


def _eval(src: str, obj):
    mod = inspect.getmodule(obj)
    try:
        return eval(src, dict(vars(mod)) if mod else {})  # noqa: S307 (doc text, read-only)
    except Exception:
        return _MISSING


def _same_default(src: str, actual, obj) -> bool:
    value = _eval(src, obj)
    if value is _MISSING:
        return src == repr(actual)
    try:
        return bool(value == actual) and type(value) is type(actual)
    except Exception:
        return value is actual


def _doc_params(text: str):
    args = _params(text)
    elided = text.strip().endswith("...")
    out = []
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + [ast.unparse(d) for d in args.defaults]
    for a, d in zip(pos, defaults, strict=True):
        kind = "POSITIONAL_ONLY" if a in args.posonlyargs else "POSITIONAL_OR_KEYWORD"
        out.append((a.arg, kind, d))
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", None))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((a.arg, "KEYWORD_ONLY", ast.unparse(d) if d is not None else None))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", None))
    return out, elided


def _norm(annotation: str) -> str:
    return re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Za-z_])", "", annotation.replace(" ", ""))


def check_call(shown: Shown, obj) -> list[str]:
    problems = []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as e:
        return [f"no signature: {e}"]
    actual = list(sig.parameters.values())
    if actual and actual[0].name in ("self", "cls") and not inspect.isclass(obj):
        actual = actual[1:]
    doc, elided = _doc_params(shown.text)
    if doc and doc[0][0] in ("self", "cls"):
        doc = doc[1:]
    real = [(p.name, p.kind.name, p.default) for p in actual]
    if elided:
        real = real[: len(doc)]
    if [d[0] for d in doc] != [r[0] for r in real]:
        problems.append(f"parameters {[d[0] for d in doc]} != code {[r[0] for r in real]}")
    else:
        for (name, kind, src), (_, rkind, rdefault) in zip(doc, real, strict=True):
            if kind != rkind:
                problems.append(f"{name}: {kind.lower()} in the doc, {rkind.lower()} in code")
            has = rdefault is not inspect.Parameter.empty
            if src is None and has:
                problems.append(f"{name}: code has default {rdefault!r}, the doc shows none")
            elif src is not None and not has:
                problems.append(f"{name}: doc shows default {src}, code has none")
            elif src is not None and not _same_default(src, rdefault, obj):
                problems.append(f"{name}: default {src} in the doc, {rdefault!r} in code")
    returns = sig.return_annotation
    if shown.returns and returns is not inspect.Signature.empty and not inspect.isclass(obj):
        returns = returns if isinstance(returns, str) else inspect.formatannotation(returns)
        doc_ret = shown.returns.strip()
        if doc_ret.startswith("("):  # a tuple written by its parts: compare the count
            n_doc = len(_split_top(doc_ret[1:-1], ","))
            inner = re.match(r"^\s*tuple\[(.*)\]\s*$", returns)
            n_code = len(_split_top(inner[1], ",")) if inner else None
            if n_code is not None and n_doc != n_code:
                problems.append(f"returns {n_doc} values in the doc, {returns} in code")
        elif _norm(doc_ret) != _norm(returns):
            problems.append(f"returns {doc_ret} in the doc, {returns} in code")
    return problems


def _doc_fields(text: str):
    out = []
    for item in _split_top(text, ";"):
        m = re.match(r"^([A-Za-z_]\w*)\s*(?::\s*([^=]+?))?\s*(?:=\s*(.+))?$", item)
        if m:
            out.append((m[1], m[3]))
    return out


def _real_fields(cls):
    if dataclasses.is_dataclass(cls):
        out = []
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING and f.metadata:
                out.append((f.name, ("field", f)))  # a default with a rule, e.g. real(0.9, 0, 1)
            elif f.default is not dataclasses.MISSING:
                out.append((f.name, ("value", f.default)))
            elif f.default_factory is not dataclasses.MISSING:
                out.append((f.name, ("factory", f.default_factory)))
            else:
                out.append((f.name, None))
        return out
    if hasattr(cls, "_fields"):  # NamedTuple
        defaults = getattr(cls, "_field_defaults", {})
        return [(f, ("value", defaults[f]) if f in defaults else None) for f in cls._fields]
    return None


def check_fields(shown: Shown, cls) -> list[str]:
    real = _real_fields(cls)
    if real is None:
        return [f"{shown.name} is not a dataclass or NamedTuple; show its __init__ instead"]
    doc = _doc_fields(shown.text)
    if [d[0] for d in doc] != [r[0] for r in real]:
        return [f"fields {[d[0] for d in doc]} != code {[r[0] for r in real]}"]
    problems = []
    for (name, src), (_, default) in zip(doc, real, strict=True):
        if src is None and default is not None:
            problems.append(f"{name}: code has a default, the doc shows none")
        elif src is not None and default is None:
            problems.append(f"{name}: doc shows default {src}, code has none")
        elif src is not None and default[0] == "factory":
            factory = re.match(r"^field\(\s*default_factory\s*=\s*(.+)\)$", src)
            if not factory or _eval(factory[1], cls) is not default[1]:
                problems.append(f"{name}: doc {src}, code default_factory={default[1]!r}")
        elif src is not None and default[0] == "field":
            shown_field = _eval(src, cls)
            if not isinstance(shown_field, dataclasses.Field) or (
                shown_field.default,
                dict(shown_field.metadata),
            ) != (default[1].default, dict(default[1].metadata)):
                problems.append(
                    f"{name}: doc {src}, code {default[1].default!r} with rule "
                    f"{dict(default[1].metadata)}"
                )
        elif src is not None and not _same_default(src, default[1], cls):
            problems.append(f"{name}: default {src} in the doc, {default[1]!r} in code")
    return problems


def _as_tuple(value):
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value


SHOWN = shown_signatures(ARCH.read_text(encoding="utf-8"))


def test_the_page_shows_signatures():
    assert len(SHOWN) >= 30, [s.id for s in SHOWN]


def problems(shown: Shown) -> list[str]:
    """How the code differs from what the page shows (empty: it matches)."""
    try:
        obj = resolve(shown.name, shown.modules, shown.exact)
    except (LookupError, AttributeError) as e:
        return [str(e)]
    if shown.kind == "fields":
        return check_fields(shown, obj)
    if shown.kind == "constant":
        try:
            value = ast.literal_eval(shown.text)
        except (ValueError, SyntaxError):
            return []
        same = _as_tuple(value) == _as_tuple(obj)
        return [] if same else [f"{shown.name} = {shown.text} in the doc, {obj!r} in code"]
    if shown.kind == "class":
        return [] if inspect.isclass(obj) else [f"{obj!r} is no class"]
    if shown.kind == "name":
        return []
    return check_call(shown, obj)


@pytest.mark.parametrize("shown", SHOWN, ids=lambda s: s.id)
def test_signature_matches_the_code(shown):
    found = problems(shown)
    assert not found, f"ARCHITECTURE.md line {shown.line}, {shown.name}: " + "; ".join(found)


def test_the_checker_catches_drift():
    """Each kind of drift the page once had is reported (so a green run means something)."""
    page = """
## The engine (flkit/engine/)
```python
# flkit.engine
@dataclass(frozen=True)
class LocalSpec:
    lr: float
    batch_size: int
    epochs: int | None = None
    steps: int | None = None
    momentum: float = 0.0
    weight_decay: float = 0.0
    drop_last: bool = False
def evaluate(model, state, x, y, batch_size=1024, per_class=None)
```
## Compression (flkit/compress/)
`ErrorFeedback.step(key, g, codec)`
```python
# flkit.experiment
def resolve_backend(config, out_dir=None, cache=True, setup=None) -> (config, history, a, b)
```
```python
# flkit.inversion
def invert(model, start, target, local, spec, x0, y0, box=None) -> InversionResult
```
```python
# flkit.methods.base
class Method:
    def downlink(self, state, clients) -> list[int]
```
```python
# flkit.engine
BACKENDS = ("auto", "wide")
```
```python
# flkit.methods.hyperparameters
@dataclass(frozen=True)
class LearningRateDecay(Hyperparameters):
    lr_decay: float = real(1.0, 0.0, 1.0)
```
"""
    found = {s.name: problems(s) for s in shown_signatures(page)}
    assert "fresh_batches" in found["LocalSpec"][0]
    assert "batch_size: default 1024" in found["evaluate"][0]
    assert (
        "['key', 'g', 'codec'] != code ['key', 'g', 'compress_fn']"
        in found["ErrorFeedback.step"][0]
    )
    assert "returns 4 values" in found["resolve_backend"][0]
    assert "'backend', 'topk', 'snapshot_every']" in found["invert"][0]
    assert "has no attribute 'downlink'" in found["Method.downlink"][0]
    assert "BACKENDS" in found["BACKENDS"][0]
    assert "'low_open': True" in found["LearningRateDecay"][0]  # the rule, not only the default
    assert _named_paths("see `flkit/presets/*.toml` and flkit/compress.py") == {
        "flkit/presets/*.toml",
        "flkit/compress.py",
    }
    assert _missing("flkit/presets/*.toml") and _missing("flkit/compress.py")
    assert not _missing("flkit/papers/*/preset.toml")


def _named_paths(text: str) -> set[str]:
    paths = set()
    for p in PATH.findall(text):
        p = p.rstrip(".,;:)")
        p = p.replace("flkit/papers/<slug>", "flkit/papers/_template")
        if "<" not in p and p not in ("flkit/", "tests/"):
            paths.add(p)
    return paths


def _missing(path: str) -> bool:
    if "*" in path:
        return not list(ROOT.glob(path))
    return not (ROOT / path.rstrip("/")).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_the_page_names_exists(page):
    missing = sorted(p for p in _named_paths(page.read_text(encoding="utf-8")) if _missing(p))
    assert not missing, f"docs/{page.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_dotted_name_the_page_names_exists(page):
    bad = []
    for span in re.findall(r"`([^`]+)`", page.read_text(encoding="utf-8")):
        name = span.strip().split("(")[0]
        if DOTTED.match(name):
            try:
                resolve(name, ())
            except (LookupError, AttributeError) as e:
                bad.append(f"{name} ({e})")
    assert not bad, f"docs/{page.name} names objects that do not exist: {bad}"


def test_bare_file_names_exist_in_their_section():
    """`sparsify.py` under '## Compression (flkit/compress/)' must be flkit/compress/sparsify.py."""
    missing, dirs = [], []
    for n, line in enumerate(ARCH.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            dirs = [ROOT / p.rstrip("/") for p in re.findall(r"flkit[\w/]*/(?=[),\s])", line + " ")]
        for span in re.findall(r"`([\w]+\.py)`", line):
            if dirs and not any(list(d.rglob(span)) for d in dirs):
                missing.append(
                    f"line {n}: {span} not under {[str(d.relative_to(ROOT)) for d in dirs]}"
                )
    assert not missing, "\n".join(missing)
