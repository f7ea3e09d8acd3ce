import os
from pathlib import Path

import pytest


def pytest_sessionstart(session):
    """In CI (FLKIT_REQUIRE_DATA=1) tests that need the dataset mirror must run, not skip."""
    if os.environ.get("FLKIT_REQUIRE_DATA") == "1":
        mirror = os.environ.get("FLKIT_MIRROR", "")
        if not mirror or not Path(mirror).is_dir():
            pytest.exit(
                f"FLKIT_REQUIRE_DATA=1 but FLKIT_MIRROR={mirror!r} is not a folder; "
                "point it at the "
                "dataset mirror (see data/README.md)",
                returncode=4,
            )


@pytest.fixture(autouse=True)
def _no_active_preset():
    """Each test starts with no active preset: a test that loads the `paper` preset to read its
    values must not make later tests refuse the mirror's reduced CIFAR copies."""
    from flkit.datasets import identity

    identity.set_policy(None)
    yield
    identity.set_policy(None)
