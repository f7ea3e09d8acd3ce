"""`flkit data prepare NAME`: build a dataset from its public source into the data root, in the
layout :func:`flkit.data.load` reads.

    prepare("cifar10")                                  # the CIFAR page's tarball, md5 checked
    prepare("femnist", location="leaf/data/femnist")    # LEAF's output (its JSON shards)
    prepare("har", location="~/Downloads/har.zip")      # an archive downloaded by hand
    prepare("mnist", location="/media/usb/mnist/")      # the published files, from a folder

Before anything is downloaded the name, the location and the data root are checked, and a dataset
the data root already holds is left alone unless ``force``. Then, in a private temporary folder
inside the data root: every archive is fetched (``fetch(url, dest)``; by default torchvision's
downloader for http(s), with a progress bar, and a plain copy for a local path or ``file://`` URL)
and checked against the md5 its publisher gives; the source's reader
(:mod:`flkit.data.source_readers`) writes the dataset's files; ``load``'s own reader decodes them,
with its shape checks. Only then are the files renamed into the data root (each rename atomic) and
the temporary folder removed. A failure at any step removes the temporary folder and leaves the
data root as it was. The copy is named by its content like any other (:mod:`flkit.data.provenance`)
and its identity is printed, reduced or full.

The offline mirror is never written; a prepared copy in the data root comes before it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from ..utils import FlkitError, check_choice
from . import decoded, files, provenance
from .public_sources import LEAF_STEPS, PREPARABLE, SOURCES, Archive, Source
from .source_readers import READERS, SourceFormatError, leaf_shards, safe_extract
from .sources import data_root, mirror_dir

#: a temporary folder of a prepare this old was left by a process that died
STALE_TMP_SECONDS = 24 * 3600
TMP_PREFIX = ".prepare-"

__all__ = ["prepare", "prepare_many", "plan", "fetch_url", "Prepared", "PREPARABLE"]


@dataclass
class Prepared:
    """What :func:`prepare` did for one dataset: the files written (none when skipped), the
    identity of the copy now in the data root (None when skipped) and, when skipped, why."""

    dataset: str
    files: list[Path] = field(default_factory=list)
    identity: dict | None = None
    skipped: str | None = None


# --------------------------------------------------------------------------- fetching
def fetch_url(url: str, dest: Path) -> None:
    """Copy ``url`` to ``dest``: http(s) through torchvision's downloader (which shows a progress
    bar), a local path or ``file://`` URL by a plain copy."""
    parsed = urlparse(str(url))
    if parsed.scheme in ("http", "https"):
        from torchvision.datasets.utils import download_url

        download_url(str(url), str(dest.parent), dest.name)
        return
    shutil.copyfile(_local(str(url)), dest)


def _local(url: str) -> Path:
    parsed = urlparse(url)
    return Path(url2pathname(parsed.path)) if parsed.scheme == "file" else Path(url).expanduser()


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _get(archive: Archive, urls, dest_dir: Path, fetch, log) -> tuple[Path, str]:
    """``archive`` fetched from the first of ``urls`` that serves it with its published md5:
    (the file, the URL it came from)."""
    dest = dest_dir / archive.filename
    tried = []
    for url in urls:
        size = f" ({archive.size / 1e6:,.1f} MB)" if archive.size else ""
        log(f"  fetching {url}{size}")
        dest.unlink(missing_ok=True)
        try:
            fetch(url, dest)
        except Exception as e:  # any failure of one URL: try the next, report them all
            tried.append(f"{url}: {type(e).__name__}: {e}")
            continue
        if not dest.is_file() or dest.stat().st_size == 0:
            tried.append(f"{url}: nothing was received")
            continue
        if archive.md5 is not None:
            got = _md5(dest)
            if got != archive.md5:
                tried.append(
                    f"{url}: md5 {got}, but the published md5 of {archive.filename} is "
                    f"{archive.md5} (truncated, damaged or another file)"
                )
                continue
            log(f"  md5 of {archive.filename} matches the published {archive.md5}")
        return dest, url
    online = all(urlparse(u).scheme in ("http", "https") for u in urls)
    raise SourceFormatError(
        f"could not get {archive.filename}:\n    "
        + "\n    ".join(tried)
        + (
            "\n  Offline? Put the published file in a folder and pass it: --from FOLDER"
            if online
            else ""
        )
    )


# --------------------------------------------------------------------------- locations
def _location(location):
    """('dir' | 'file', Path) or ('url', str) for a --from value; FlkitError for anything else."""
    if location is None:
        return None
    text = str(location)
    scheme = urlparse(text).scheme
    if scheme in ("http", "https"):
        return "url", text
    if scheme not in ("", "file"):
        raise FlkitError(
            f"location {text!r}: unknown scheme {scheme!r}; accepted: a folder, a file, or an "
            "http://, https:// or file:// URL"
        )
    path = _local(text)
    if path.is_dir():
        return "dir", path
    if path.is_file():
        return "file", path
    raise FlkitError(
        f"location {text!r}: no such file or folder; accepted: a folder, a file, or an http://, "
        "https:// or file:// URL"
    )


def _archive_urls(src: Source, loc) -> list[list[str]]:
    """For each archive of ``src``, the URLs to try: the published ones, or the one in ``loc``."""
    if loc is None:
        return [list(a.urls) for a in src.archives]
    kind, where = loc
    if kind == "dir":
        return [[str(where / a.filename)] for a in src.archives]
    single = len(src.archives) == 1
    if kind == "file":
        if not single:
            names = ", ".join(a.filename for a in src.archives)
            raise FlkitError(
                f"{src.dataset} is published as {len(src.archives)} files ({names}); a location "
                f"that is one file ({where}) cannot hold them: pass the folder that does"
            )
        return [[str(where)]]
    if single and not where.endswith("/"):
        return [[where]]
    return [[where.rstrip("/") + "/" + a.filename] for a in src.archives]


def _leaf_candidates(base: Path, name: str) -> list[Path]:
    """Where LEAF's ``train/`` and ``test/`` may be below ``base``: base itself, ``data/`` (LEAF's
    dataset folder), ``<name>/data/`` (LEAF's ``data/`` folder), or one folder down (an archive's
    top folder)."""
    out = [base, base / "data", base / name / "data"]
    if base.is_dir():
        for child in sorted(p for p in base.iterdir() if p.is_dir()):
            out += [child, child / "data", child / name / "data"]
    return out


def _leaf_folder(base: Path, name: str, what: str) -> Path:
    hits = []
    for cand in _leaf_candidates(base, name):
        shards = leaf_shards(cand) if cand.is_dir() else {"train": [], "test": []}
        if shards["train"] and shards["test"] and cand not in hits:
            hits.append(cand)
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise FlkitError(
            f"{what} holds no LEAF output for {name}: looked for train/*.json and test/*.json in "
            f"{base}, its data/ and {name}/data/ and one folder down. Make it with: "
            f"{LEAF_STEPS[name]}"
        )
    raise FlkitError(
        f"{what} holds several LEAF outputs ({', '.join(map(str, hits))}); pass the one to use"
    )


def _unpack(path: Path, dest: Path) -> None:
    """A LEAF output archive (.zip, .tar, .tar.gz, .tgz, .tar.bz2, .tar.xz) unpacked into dest."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for member in z.namelist():
                    target = (dest / member).resolve()
                    if not target.is_relative_to(dest.resolve()):
                        raise SourceFormatError(f"{path}: member {member!r} points outside")
                z.extractall(dest)
        elif tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                safe_extract(tar, dest)
        else:
            raise SourceFormatError(
                f"{path}: neither a zip nor a tar archive (a LEAF output folder, or a .zip / "
                ".tar[.gz|.bz2|.xz] of one, is accepted)"
            )
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise SourceFormatError(f"{path}: cannot unpack ({type(e).__name__}: {e})") from None


# --------------------------------------------------------------------------- the data root
def _writable_root(root) -> Path:
    r = data_root(root)
    m = mirror_dir()
    if m is not None and m.exists() and r.exists() and r.resolve() == m.resolve():
        raise FlkitError(
            f"the data root {r} is the offline mirror, which is never written: pass --root DIR "
            "(or set $FLKIT_DATA) to a writable folder"
        )
    return r


def _describe_present(kind, paths) -> str:
    shown = paths[0].parent if kind == "idx" else paths[0]
    if paths[0].is_symlink():
        return f"{shown} (a link to {os.path.realpath(paths[0])})"
    return str(shown)


def _shadowing(name: str, layout: str, present) -> list[Path]:
    """The files ``load`` would read instead of a prepared copy in ``layout``: those of a layout
    it prefers (``files.candidates`` order) that the data root holds in full."""
    if present is None:
        return []
    order = [kind for kind, _ in files.candidates(name, ".")]
    kind, paths = present
    return list(paths) if order.index(kind) < order.index(layout) else []


def _remove_stale(root: Path) -> None:
    for tmp in root.glob(TMP_PREFIX + "*"):
        try:
            if time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            continue


def _check_destinations(root: Path, destinations) -> None:
    """FlkitError unless every destination lies inside the data root (no folder on the way is a
    link out of it, to the mirror say) and none is a folder."""
    real_root = root.resolve()
    for dst in destinations:
        parent = dst.parent
        while not parent.exists() and parent != root:
            parent = parent.parent
        if not parent.exists():
            continue  # nothing on the way exists yet: prepare makes the folders
        if not parent.resolve().is_relative_to(real_root):
            raise FlkitError(
                f"{parent} is a link out of the data root {root} (to {parent.resolve()}); "
                "prepare writes only inside the data root: remove the link first"
            )
        if dst.is_dir() and not dst.is_symlink():
            raise FlkitError(f"{dst} is a folder; prepare would replace it with a file")


def _install(out: Path, root: Path) -> list[Path]:
    """Rename every file under ``out`` to the same place under ``root``; all destinations are
    checked before the first rename."""
    moves = [(f, root / f.relative_to(out)) for f in sorted(out.rglob("*")) if f.is_file()]
    _check_destinations(root, [dst for _, dst in moves])
    for src, dst in moves:
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    return [dst for _, dst in moves]


def _build(name, src: Source, urls, loc, leaf_dir, tmp: Path, fetch, origins: dict, log):
    """Fetch and check the source, run its reader into ``tmp/out`` and decode the result with
    ``load``'s reader: (arrays, content facts)."""
    downloads, out = tmp / "downloads", tmp / "out"
    downloads.mkdir()
    out.mkdir()
    if src.archives:
        inputs = []
        for archive, tries in zip(src.archives, urls):
            got, origins[got] = _get(archive, tries, downloads, fetch, log)
            inputs.append(got)
    elif leaf_dir is not None:
        inputs = [leaf_dir]
    else:
        what = str(loc[1])
        archive = Archive(Path(urlparse(what).path).name or "leaf-output", (what,))
        got, origins[got] = _get(archive, [what], downloads, fetch, log)
        _unpack(got, tmp / "leaf")
        origins[tmp / "leaf"] = f"{what} (unpacked)"
        inputs = [_leaf_folder(tmp / "leaf", name, what)]
    READERS[src.reader](name, inputs, out, log)
    hit = files.find(name, out)
    if hit is None or hit[0] != src.layout:
        raise SourceFormatError(f"the {src.reader} reader wrote no {src.layout} files for {name}")
    kind, paths = hit
    try:
        arrays = files.read(name, kind, paths)
    except FlkitError as e:
        raise SourceFormatError(f"the files built for {name} do not load: {e}") from None
    return arrays, provenance.content_facts(name, arrays)


# --------------------------------------------------------------------------- one dataset
def prepare(
    name: str,
    root=None,
    location=None,
    *,
    force: bool = False,
    fetch=None,
    source: Source | None = None,
    log=print,
) -> Prepared:
    """Build dataset ``name`` from its public source into the data root (``root``, else
    ``$FLKIT_DATA``, else ``data/``).

    ``location``: where to take the source from instead of its published URLs: a folder holding
    the published files (or, for FEMNIST and Shakespeare, LEAF's output), one file (a one-file
    source, or an archive of LEAF's output), or an http(s):// or file:// URL (a one-file source's
    file, else the prefix its files' names are appended to). Required for FEMNIST and
    Shakespeare, which LEAF does not publish as files (``LEAF_STEPS`` makes them).
    ``force``: build again although the data root holds the dataset (a link to the mirror's copy
    included). ``fetch(url, dest)``: downloads one file (default :func:`fetch_url`). ``source``:
    a :class:`flkit.data.public_sources.Source` to use instead of the published one (tests point
    it at fixture files). ``log``: where progress lines go."""
    check_choice("dataset to prepare", name, PREPARABLE)
    src = source if source is not None else SOURCES[name]
    fetch = fetch or fetch_url
    loc = _location(location)
    if not src.archives and loc is None:
        raise FlkitError(
            f"{name} has no published archive: LEAF publishes the scripts that build it. Make it "
            f"with `{LEAF_STEPS[name]}`, then run `flkit data prepare {name} --from "
            f"leaf/data/{name}` (data/README.md says why LEAF's output and not Flower Datasets)"
        )
    urls = _archive_urls(src, loc) if src.archives else None
    leaf_dir = None
    if not src.archives and loc[0] == "dir":
        leaf_dir = _leaf_folder(loc[1], name, f"--from {loc[1]}")
    r = _writable_root(root)
    present = files.find(name, r) if r.is_dir() else None
    if present is not None and not force:
        why = (
            f"the data root already holds {name}: {_describe_present(*present)}; nothing done "
            "(--force builds it again from its source and replaces it)"
        )
        log(f"{name}: {why}")
        return Prepared(name, skipped=why)
    shadow = _shadowing(name, src.layout, present)
    if shadow:
        raise FlkitError(
            f"{', '.join(map(str, shadow))} in the data root would be read instead of the "
            f"prepared {name}; move it out of {r} first"
        )
    layout_files = dict(files.candidates(name, r))[src.layout]
    _check_destinations(r, layout_files)
    try:
        r.mkdir(parents=True, exist_ok=True)
        _remove_stale(r)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-", dir=r))
    except OSError as e:
        raise FlkitError(
            f"cannot write in the data root {r} ({type(e).__name__}: {e}); pass --root DIR or "
            "set $FLKIT_DATA to a writable folder"
        ) from None
    try:
        log(f"{name}: building from {loc[1] if loc else src.homepage} in {tmp}")
        origins: dict = {}  # temporary path -> what the user knows it as, for error messages
        try:
            arrays, facts = _build(name, src, urls, loc, leaf_dir, tmp, fetch, origins, log)
        except SourceFormatError as e:
            msg = str(e)
            for path, origin in origins.items():
                msg = msg.replace(str(path), origin)
            raise SourceFormatError(f"{msg}\n  Nothing was written to {r}.") from None
        written = _install(tmp / "out", r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    kind, paths = files.find(name, r)
    decoded.put(name, kind, files.signature(paths), arrays, facts)  # load need not hash again
    shown = paths[0].parent if kind == "idx" else paths[0]
    ident = provenance.identity(facts, str(shown))
    log(f"{name}: written to {shown}\n  {provenance.describe(ident)}")
    return Prepared(name, written, ident)


# --------------------------------------------------------------------------- several
def plan(names, locations=None, root=None) -> tuple[list[str], dict]:
    """The datasets ``names`` stands for (``["all"]``: every one) and the location of each,
    checked before any work: unknown names, locations for datasets not named, FEMNIST or
    Shakespeare without a location, and the mirror as the data root are refused.

    ``locations``: ``{dataset: location}``, or ``{None: location}`` for the one dataset named."""
    names = list(names)
    if not names:
        raise FlkitError(f"name a dataset to prepare; accepted: {', '.join(PREPARABLE)} or all")
    if "all" in names and len(names) > 1:
        raise FlkitError(f"'all' stands alone; got {' '.join(names)}")
    todo = list(PREPARABLE) if names == ["all"] else list(dict.fromkeys(names))
    for n in todo:
        if n not in PREPARABLE:
            raise FlkitError(
                f"unknown dataset to prepare {n!r}; accepted: {', '.join(PREPARABLE)} or all "
                "(synthetic is generated and needs no files)"
            )
    locations = dict(locations or {})
    if None in locations:
        if len(todo) != 1:
            raise FlkitError(
                f"--from {locations[None]!r} without a dataset name, but {len(todo)} datasets are "
                "to be prepared; accepted: --from NAME=LOCATION for each"
            )
        locations[todo[0]] = locations.pop(None)
    extra = sorted(set(locations) - set(todo))
    if extra:
        raise FlkitError(
            f"--from names {', '.join(extra)}, which is not to be prepared here "
            f"(preparing: {', '.join(todo)})"
        )
    for n, where in locations.items():  # each location fits its dataset's source
        loc = _location(where)
        if SOURCES[n].archives:
            _archive_urls(SOURCES[n], loc)
        elif loc[0] == "dir":
            _leaf_folder(loc[1], n, f"--from {where}")
    leaf = [n for n in todo if not SOURCES[n].archives and n not in locations]
    if leaf:
        steps = "\n".join(f"  {n}: {LEAF_STEPS[n]}" for n in leaf)
        raise FlkitError(
            f"{' and '.join(leaf)} need LEAF's output, which no server publishes as files: make "
            f"it with\n{steps}\nthen pass "
            + " ".join(f"--from {n}=leaf/data/{n}" for n in leaf)
            + (
                f", or prepare the others: flkit data prepare "
                f"{' '.join(n for n in todo if n not in leaf)}"
                if len(todo) > len(leaf)
                else ""
            )
        )
    _writable_root(root)
    return todo, locations


def prepare_many(names, root=None, locations=None, *, force=False, fetch=None, log=print) -> list:
    """:func:`prepare` for each of ``names`` (see :func:`plan`), one after the other; a dataset
    that fails is reported and the others go on. Returns (name, Prepared or the error)."""
    todo, locations = plan(names, locations, root)
    done = []
    for n in todo:
        try:
            done.append((n, prepare(n, root, locations.get(n), force=force, fetch=fetch, log=log)))
        except FlkitError as e:
            log(f"{n}: FAILED: {e}")
            done.append((n, e))
    return done
