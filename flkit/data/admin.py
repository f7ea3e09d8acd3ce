"""`flkit data list|verify|download|prepare|link`: see where datasets are, check them, fetch them,
build them from their public sources, link a mirror.

``flkit/cli.py`` calls :func:`register_cli` with its argparse subparsers object; every
sub-command sets ``args.func(args) -> int`` (the exit status). ``python -m flkit.data.admin ...``
runs the same commands on their own.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
from pathlib import Path

from ..utils import FlkitError, run_command
from . import decoded, files, provenance, sources
from .public_sources import PREPARABLE

# which mirror entries belong to which dataset (for `verify NAME` and `link`)
_MIRROR_PREFIX = {"mnist": "MNIST/", "fmnist": "FashionMNIST/"}


def _belongs(name: str, entry: str) -> bool:
    return (
        entry.startswith(_MIRROR_PREFIX[name]) if name in _MIRROR_PREFIX else entry == f"{name}.npz"
    )


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return _sha256_stream(fh)


def _sha256_stream(fh) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def _manifest(*dirs):
    for d in dirs:
        if d is not None and (Path(d) / "MANIFEST.json").is_file():
            path = Path(d) / "MANIFEST.json"
            try:
                return path, json.loads(path.read_text())
            except (OSError, ValueError) as e:
                raise FlkitError(f"cannot read {path}: {e}") from None
    return None, None


# --------------------------------------------------------------------------- list
def cmd_list(args) -> int:
    root, mirror = sources.data_root(args.root), sources.mirror_dir(args.mirror)
    print(f"data root: {root.resolve()}{'' if root.is_dir() else '  (does not exist)'}")
    print(
        f"mirror:    {mirror if mirror else 'not set (use --mirror or $FLKIT_MIRROR)'}"
        f"{'' if mirror is None or mirror.is_dir() else '  (does not exist)'}"
    )
    print()
    print(f"{'dataset':<12} {'where':<8} {'layout':<13} path")
    missing = []
    for name in sources.DATASETS:
        if name == "synthetic":
            print(
                f"{name:<12} {'built-in':<8} {'generated':<13} "
                "(FedProx Synthetic(alpha, beta), no files needed)"
            )
            continue
        hit = sources.locate(name, args.root, args.mirror)
        if hit is None:
            missing.append(name)
            print(f"{name:<12} {'missing':<8} {'-':<13} -")
        else:
            place, kind, paths = hit
            shown = paths[0].parent if kind == "idx" else paths[0]
            print(f"{name:<12} {place:<8} {kind:<13} {shown}")
    if missing:
        print()
        down = [m for m in missing if m in sources.DOWNLOADABLE]
        print(
            "To get the missing ones: `flkit data link --mirror /path/to/mirror` (offline copy)"
            + (f" or `flkit data download {' '.join(down)}` (needs internet)" if down else "")
            + f", or build them from their public sources: `flkit data prepare {' '.join(missing)}`"
            + " (data/README.md)."
        )
    return 0


# --------------------------------------------------------------------------- verify
def cmd_verify(args) -> int:
    root, mirror = sources.data_root(args.root), sources.mirror_dir(args.mirror)
    names = args.names or [n for n in sources.DATASETS if n != "synthetic"]
    for n in names:
        if n not in sources.DATASETS:
            raise FlkitError(f"unknown dataset {n!r}; accepted: {', '.join(sources.DATASETS)}")
    mpath, manifest = _manifest(mirror, root)
    entries = {f["name"]: f for f in manifest["files"]} if manifest else {}
    if manifest:
        print(f"checking sha256 against {mpath}")
    else:
        print(
            "no MANIFEST.json found in the mirror or the data root: "
            "decoding the files instead of hashing them"
        )
    places = [d for d in (root, mirror) if d is not None and d.is_dir()]
    bad = checked = 0
    missing = []
    for name in names:
        if name == "synthetic":
            continue
        hit = sources.locate(name, args.root, args.mirror)
        if hit is None:
            missing.append(name)
            print(f"  missing  {name:<12} (not in the data root or the mirror)")
            continue
        place, kind, paths = hit
        base = root if place == "root" else mirror
        read = [p for f in paths for p in (sorted(f.iterdir()) if f.is_dir() else [f])]
        unchecked = []
        for p in read:  # the files flkit.data.load reads, each against the manifest
            verdict = _against_manifest(p, base, entries, places)
            if verdict is None:
                unchecked.append(p)
                continue
            ok, detail = verdict
            checked += 1
            bad += not ok
            print(f"  {'OK      ' if ok else 'MISMATCH'} {name:<12} {p} (read by load){detail}")
        if unchecked:  # no checksum on record: at least it must decode
            checked += 1
            try:
                files.read(name, kind, paths)
                shown = ", ".join(str(p) for p in unchecked)
                print(f"  OK       {name:<12} {shown} (read by load; decoded, no checksum on file)")
            except FlkitError as e:
                bad += 1
                print(f"  CORRUPT  {name:<12} {e}")
        for d in places:  # manifest files of this dataset that load does not read (shadowed)
            for e in (e for e in entries if _belongs(name, e)):
                p = d / e
                if p.is_file() and p not in read:
                    got = _sha256(p)
                    ok = got == entries[e]["sha256"]
                    checked += 1
                    bad += not ok
                    print(
                        f"  {'OK      ' if ok else 'MISMATCH'} {name:<12} {p} (not read: "
                        f"{'the data root' if d == mirror else 'another layout'} comes first)"
                        + ("" if ok else _mismatch(got, entries[e]["sha256"]))
                    )
        entry = _machine_entry(name, kind, paths)
        if entry is not None:  # the decoded copy load reads instead of these files
            checked += 1
            bad += not entry[0]
            print(f"  {entry[1]}")
    print(f"{checked} file(s)/folder(s) checked, {bad} bad")
    if bad:
        print(
            "Replace bad files: re-link the mirror (`flkit data link --mirror PATH --force`) or "
            "re-download (`flkit data download NAME`)."
        )
    asked = [n for n in missing if n in (args.names or ())]
    if not checked or asked:
        # nothing verified is no verdict: a script must not read "all files OK" from it
        print(
            f"{'nothing was checked' if not checked else 'not found: ' + ', '.join(asked)}: "
            f"the data root {root} and the mirror {mirror or '(not set)'} hold "
            f"{'none of ' + ', '.join(names) if not checked else 'no such dataset'}. Link a "
            "mirror (`flkit data link --mirror PATH`, or set $FLKIT_MIRROR) or download it "
            "(`flkit data download NAME`)."
        )
        return 1
    return 1 if bad else 0


def _machine_entry(name: str, kind: str, paths) -> tuple[bool, str] | None:
    """(whole, one line) for the machine cache's decoded copy of these files
    (:mod:`flkit.data.decoded`), None when there is none. Its arrays are hashed again and its
    content facts compared with those of the source files, decoded again; a damaged entry is
    replaced by one written from the source files."""
    signature = files.signature(paths)
    where = decoded.entry_path(name, signature)
    if not (where / "entry.json").exists():
        return None
    try:
        raw = files.read(name, kind, paths)
        facts = provenance.content_facts(name, raw)
    except FlkitError:  # the source files themselves are reported bad above
        raw = facts = None
    result = decoded.check(name, signature, facts)
    if result is None:  # an entry of another format: never read
        return None
    where, problem = result
    if not problem:
        return True, f"OK       {name:<12} {where} (machine cache: checksums and content)"
    decoded.remove(where)
    rebuilt = raw is not None and decoded.put(name, kind, signature, raw, facts) is not None
    return False, (
        f"DAMAGED  {name:<12} {where} (machine cache): {problem}; "
        + ("rebuilt from the source files" if rebuilt else "removed: the next load rebuilds it")
    )


def _mismatch(got: str, want: str) -> str:
    return f"\n           sha256 {got}\n           expected {want}"


def _against_manifest(path: Path, base: Path, entries: dict, places: list):
    """(ok, detail) for a file read from ``base``: its sha256 against its manifest entry, or,
    for an unpacked IDX file whose .gz is on record, its bytes against the unpacked content of
    a .gz copy that matches its record. None when nothing on record covers it."""
    rel = path.relative_to(base).as_posix()
    if rel in entries:
        got, want = _sha256(path), entries[rel]["sha256"]
        return got == want, "" if got == want else _mismatch(got, want)
    packed = entries.get(rel + ".gz")
    for d in places if packed else ():
        gz = d / (rel + ".gz")
        if gz.is_file() and _sha256(gz) == packed["sha256"]:
            with gzip.open(gz, "rb") as fh:
                want = _sha256_stream(fh)
            got = _sha256(path)
            if got == want:
                return True, f" (= {gz} unpacked)"
            return False, f"\n           differs from the unpacked content of {gz}" + _mismatch(
                got, want
            )
    return None


# --------------------------------------------------------------------------- download
def cmd_download(args) -> int:
    names = list(sources.DOWNLOADABLE) if args.names == ["all"] else args.names
    for n in names:
        if n not in sources.DATASETS:
            raise FlkitError(
                f"unknown dataset {n!r}; accepted: {', '.join(sources.DOWNLOADABLE)} or all"
            )
        if n not in sources.DOWNLOADABLE:
            raise FlkitError(
                f"{n!r} cannot be downloaded with torchvision "
                f"(accepted: {', '.join(sources.DOWNLOADABLE)}); "
                f"get {n}.npz from an offline mirror: `flkit data link --mirror /path/to/mirror`, "
                f"or build it from its public source: `flkit data prepare {n}`"
            )
    if not args.force and not sources.is_online():
        print(
            "This machine looks offline "
            "(no connection to the torchvision download servers within 1.5 s), "
            "so nothing was downloaded.\nUse an offline mirror instead: "
            "`flkit data link --mirror /path/to/mirror` "
            "or `export FLKIT_MIRROR=/path/to/mirror`; pass --force to try anyway.",
            file=sys.stderr,
        )
        return 2
    root = sources.data_root(args.root)
    for n in names:
        print(f"downloading {n} into {root} ...")
        sources.download(n, args.root)
        print(f"  done: {sources.locate(n, args.root, '')}")
    return 0


# --------------------------------------------------------------------------- link
def link(mirror, root=None, force=False, verbose=True) -> list[Path]:
    """Symlink every file of the mirror into the data root.

    Directories are created, files linked."""
    m = Path(mirror).expanduser().resolve()
    if not m.is_dir():
        raise FlkitError(f"mirror {str(mirror)!r} is not a directory")
    known = [p for p in m.rglob("*") if p.is_file() and p.name != "README.md"]
    if not any(files.find(n, m) for n in sources.DATASETS if n != "synthetic"):
        raise FlkitError(
            f"{m} does not look like a flkit data mirror: none of "
            f"{', '.join(sources.DATASETS[:-1])} is in it (expected MNIST/raw/*.gz, cifar10.npz, "
            "...)"
        )
    r = sources.data_root(root)
    r.mkdir(parents=True, exist_ok=True)
    if r.resolve() == m:
        raise FlkitError(f"the data root {r} is the mirror itself; nothing to link")
    made = []
    for src in sorted(known):
        dst = r / src.relative_to(m)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink() and os.readlink(dst) == str(src):
            continue
        if dst.exists() or dst.is_symlink():
            if not force:
                if verbose:
                    print(f"  skip {dst} (exists; --force replaces it)")
                continue
            dst.unlink()
        os.symlink(src, dst)
        made.append(dst)
        if verbose:
            print(f"  link {dst} -> {src}")
    return made


def cmd_link(args) -> int:
    made = link(args.mirror, args.root, args.force)
    r = sources.data_root(args.root)
    print(f"{len(made)} link(s) made in {r}. `flkit data list --root {r}` shows what is now found.")
    return 0


# --------------------------------------------------------------------------- prepare
def _from_options(values) -> dict:
    """``--from [NAME=]LOCATION`` values as {dataset or None: location}."""
    out: dict = {}
    for v in values:
        name, sep, rest = v.partition("=")
        key, where = (name, rest) if sep and name in PREPARABLE else (None, v)
        if key in out:
            raise FlkitError(
                f"--from given twice for {key or 'the dataset'}: {out[key]!r} and {where!r}"
            )
        out[key] = where
    return out


def cmd_prepare(args) -> int:
    from . import prepare

    locations = _from_options(args.sources)
    done = prepare.prepare_many(args.names, args.root, locations, force=args.force)
    failed = [n for n, r in done if isinstance(r, Exception)]
    root = sources.data_root(args.root)
    print(
        f"{len(done) - len(failed)} of {len(done)} dataset(s) ready in {root}"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


# --------------------------------------------------------------------------- argparse
def _common(p, mirror=True):
    p.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="data root (default: $FLKIT_DATA, else data/ at the project root)",
    )
    if mirror:
        p.add_argument(
            "--mirror",
            default=None,
            metavar="PATH",
            help="offline mirror folder (default: $FLKIT_MIRROR)",
        )


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the `data` command (with list, verify, download, prepare, link) to an argparse
    subparsers object."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "data",
        help="find, check, download, build or link datasets",
        formatter_class=fmt,
        description="Manage flkit's datasets. flkit.data.load(NAME) looks in the data root "
        "($FLKIT_DATA, else data/ at the project root), then in the offline mirror "
        "($FLKIT_MIRROR), then downloads with torchvision when online. `prepare` builds every "
        "dataset from its public source (data/README.md).",
        epilog="examples:\n  flkit data list\n  flkit data link --mirror /path/to/mirror\n"
        "  flkit data verify mnist\n  flkit data download mnist cifar10\n"
        "  flkit data prepare mnist cifar10 har",
    )
    sub = p.add_subparsers(dest="data_command", metavar="{list,verify,download,prepare,link}")
    sub.required = True

    q = sub.add_parser(
        "list",
        help="show each dataset and where it is found (or 'missing')",
        description="Show, for every dataset name flkit.data.load accepts, whether it is found "
        "in the data root or the mirror, in which layout and at which path.",
    )
    _common(q)
    q.set_defaults(func=cmd_list)

    q = sub.add_parser(
        "verify",
        help="check the files load reads against the mirror's MANIFEST.json sha256 sums",
        description="Check the files flkit.data.load reads for each dataset (the data root "
        "first, then the mirror) against the sha256 in MANIFEST.json (looked for in the mirror, "
        "then the root): an unpacked MNIST file is compared with the unpacked content of its "
        "verified .gz, files without a record (e.g. torchvision downloads) are decoded. The "
        "manifest files that load does not read are hashed too, and so is the decoded copy in "
        "the machine cache ($FLKIT_MACHINE_DIR/data), which is compared with the source files "
        "and rebuilt when damaged. Exit status 1 when any file is bad, when nothing was "
        "checked, or when a dataset named is found nowhere.",
    )
    q.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"datasets to check (default: all); one of {', '.join(sources.DATASETS[:-1])}",
    )
    _common(q)
    q.set_defaults(func=cmd_verify)

    q = sub.add_parser(
        "download",
        help="download datasets with torchvision into the data root",
        description="Download with torchvision into the data root. "
        f"Downloadable: {', '.join(sources.DOWNLOADABLE)} "
        "(femnist, har and shakespeare come only from a mirror). Checks the connection "
        "first and says so when the machine is offline (exit status 2).",
    )
    q.add_argument(
        "names", nargs="+", metavar="NAME", help=f"{', '.join(sources.DOWNLOADABLE)}, or all"
    )
    _common(q, mirror=False)
    q.add_argument(
        "--force", action="store_true", help="skip the online check and try anyway (default: off)"
    )
    q.set_defaults(func=cmd_download)

    q = sub.add_parser(
        "link",
        help="make the data root point at an offline mirror (symlinks, no copies)",
        description="Create the mirror's folders in the data root and symlink each of its files "
        "there (MNIST/raw/*.gz, *.npz, MANIFEST.json), so that load() finds them and "
        "torchvision can still unpack or add files in the (writable) root. Nothing is "
        "copied; existing files are kept unless --force.",
    )
    q.add_argument("--mirror", required=True, metavar="PATH", help="the mirror folder to link to")
    q.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="data root to create the links in "
        "(default: $FLKIT_DATA, else data/ at the project root)",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="replace files or links that already exist (default: off)",
    )
    q.set_defaults(func=cmd_link)

    q = sub.add_parser(
        "prepare",
        help="build datasets from their public sources into the data root",
        formatter_class=fmt,
        description="Build each dataset from its public source into the data root, in the layout\n"
        "flkit.data.load reads: MNIST, Fashion-MNIST, CIFAR-10/100 and SVHN from the URLs of\n"
        "torchvision's downloaders, UCI HAR from the UCI archive, each file checked against the\n"
        "md5 its publisher gives where there is one; FEMNIST and Shakespeare from LEAF's output\n"
        "(its JSON shards), named with --from. The files are built in a temporary folder and\n"
        "renamed into place only once they load, so a failed download or a damaged archive\n"
        "leaves nothing behind. A dataset the data root already holds is skipped unless --force.\n"
        "data/README.md lists each source's URL, licence, citation and size. Exit status 1 when\n"
        "a dataset failed.",
        epilog="examples:\n  flkit data prepare mnist cifar10 har\n"
        "  flkit data prepare femnist --from leaf/data/femnist\n"
        "  flkit data prepare all --from femnist=leaf/data/femnist "
        "--from shakespeare=leaf/data/shakespeare\n"
        "  flkit data prepare mnist --from /media/usb/mnist-files/",
    )
    q.add_argument("names", nargs="+", metavar="NAME", help=f"{', '.join(PREPARABLE)}, or all")
    _common(q, mirror=False)
    q.add_argument(
        "--from",
        dest="sources",
        action="append",
        default=[],
        metavar="[NAME=]LOCATION",
        help="take a dataset's source from LOCATION instead of its published URLs: a folder "
        "holding the published files (or LEAF's output), one file, or an http(s):// or file:// "
        "URL; NAME= says which dataset when several are named; repeat it for several "
        "(default: the published URLs; femnist and shakespeare need it)",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="build a dataset again although the data root holds it, replacing it (a link to "
        "the mirror's copy included; the mirror itself is never written) (default: off)",
    )
    q.set_defaults(func=cmd_prepare)
    return p


def main(argv=None) -> int:
    """``python -m flkit.data.admin data ...``: the same as ``flkit data ...``."""
    parser = argparse.ArgumentParser(prog="flkit")
    register_cli(parser.add_subparsers(dest="command"))
    return run_command(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
