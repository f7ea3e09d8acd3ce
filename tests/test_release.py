"""The release: one version in pyproject.toml, flkit.__version__, CITATION.cff and the changelog's
latest entry; CHANGELOG.md in Keep a Changelog's shape; CITATION.cff a valid CFF 1.2.0 file (the
rules of its schema that this file can break: required keys, known keys, authors as persons or
entities, dates as quoted YYYY-MM-DD strings)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

import flkit
from flkit.workbook.presets import tomllib

ROOT = Path(__file__).resolve().parent.parent
yaml = pytest.importorskip("yaml")

# the top-level keys of CFF 1.2.0's schema (additionalProperties: false) and its required ones
CFF_KEYS = {
    "abstract",
    "authors",
    "cff-version",
    "commit",
    "contact",
    "date-released",
    "doi",
    "identifiers",
    "keywords",
    "license",
    "license-url",
    "message",
    "preferred-citation",
    "references",
    "repository",
    "repository-artifact",
    "repository-code",
    "title",
    "type",
    "url",
    "version",
}
CFF_REQUIRED = {"authors", "cff-version", "message", "title"}
PERSON_KEYS = {"family-names", "given-names", "name-particle", "name-suffix", "affiliation"}
PERSON_KEYS |= {"address", "alias", "city", "country", "email", "fax", "orcid", "post-code"}
PERSON_KEYS |= {"region", "tel", "website"}
DATE = re.compile(r"^[0-9]{4}-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])$")
SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _releases() -> list[tuple[str, str, str]]:
    """(version, date, body) of every release heading of CHANGELOG.md, top first."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    assert parts[0].startswith("[Unreleased]"), "the first heading is [Unreleased]"
    out = []
    for part in parts[1:]:
        m = re.match(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)\n", part)
        assert m, f"not a release heading: {part.splitlines()[0]!r}"
        out.append((m.group(1), m.group(2), part[m.end() :]))
    return out


def test_one_version_everywhere():
    version = _pyproject()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert flkit.__version__ == version
    assert _citation()["version"] == version
    assert _releases()[0][0] == version


def test_the_changelog_has_keep_a_changelog_shape():
    releases = _releases()
    versions = [tuple(map(int, v.split("."))) for v, _, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [dt.date.fromisoformat(d) for _, d, _ in releases]
    assert dates == sorted(dates, reverse=True)
    for version, _, body in releases:
        sections = re.findall(r"^### (.+)$", body, flags=re.M)
        assert sections and set(sections) <= set(SECTIONS), (version, sections)
        assert [s for s in SECTIONS if s in sections] == sections, f"{version}: section order"
        for section in re.split(r"^### .+$", body, flags=re.M)[1:]:
            assert re.search(r"^- ", section, flags=re.M), f"{version}: an empty section"


def _check_cff(cff: dict) -> None:
    assert CFF_REQUIRED <= set(cff) <= CFF_KEYS, set(cff) ^ CFF_KEYS
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "abstract", "version"):
        assert isinstance(cff.get(key, "x"), str) and cff.get(key, "x").strip(), key
    assert isinstance(cff["authors"], list) and cff["authors"]
    for author in cff["authors"]:
        assert isinstance(author, dict) and author
        if "name" in author:  # an entity
            assert isinstance(author["name"], str) and author["name"].strip()
        else:  # a person
            assert set(author) <= PERSON_KEYS, author
    # the schema wants a string: an unquoted YAML date would be read as a date object
    assert isinstance(cff["date-released"], str) and DATE.match(cff["date-released"])
    assert cff.get("type", "software") in ("software", "dataset")
    keywords = cff.get("keywords", [])
    assert all(isinstance(k, str) and k for k in keywords) and len(set(keywords)) == len(keywords)


def test_the_citation_is_a_valid_cff_file():
    cff = _citation()
    _check_cff(cff)
    assert cff["date-released"] == _releases()[0][1]
    assert cff["license"] == _pyproject()["license"]


GOOD = "cff-version: 1.2.0\nmessage: m\ntitle: t\nauthors:\n  - name: n\n"


@pytest.mark.parametrize(
    "broken",
    [
        GOOD + 'date-released: "2026-11-29"\nlicence: MIT\n',  # misspelt key
        GOOD + "date-released: 2026-11-29\n",  # a YAML date, not a string
        GOOD.replace("  - name: n", "  - surname: n") + 'date-released: "2026-11-29"\n',
        GOOD.replace("title: t\n", "") + 'date-released: "2026-11-29"\n',
    ],
)
def test_the_citation_rules_refuse_a_broken_file(broken):
    """The control: the rules pass the good file and fail each broken one."""
    _check_cff(yaml.safe_load(GOOD + 'date-released: "2026-11-29"\n'))
    with pytest.raises(AssertionError):
        _check_cff(yaml.safe_load(broken))
