"""README.md's configuration reference names every environment variable the code reads (issue 8)."""

from __future__ import annotations

import re

from tests.deploy.compose import ROOT
from tests.deploy.env_names import names_in_code


def _reference() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Configuration reference\n", 1)[1]
    return section.split("\n## ", 1)[0]


def test_it_documents_every_environment_variable_in_the_reference_table() -> None:
    table = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(
        line for line in _reference().splitlines() if line.startswith("|"))))
    missing = sorted(names_in_code() - table)
    assert not missing, f"add these to README.md's configuration reference: {missing}"


def test_it_finds_variables_of_each_kind() -> None:
    # The grep itself works: helpers, os.environ, engine flag twins and compose interpolations are all found.
    names = names_in_code()
    assert {"SECRET_KEY", "SPECTATOR_ADMIN_USER", "ENGINE_GIT_REVISION", "ENGINE_BUDGET", "POSTGRES_PASSWORD",
            "PROMETHEUS_MULTIPROC_DIR"} <= names
