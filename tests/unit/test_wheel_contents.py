"""What the wheel ships: the packages pyproject.toml's `[tool.setuptools.packages.find]`
selects, computed the way setuptools does. Test tooling (fuzz/), benchmarks (bench/),
scripts and tests stay outside, so a user's environment never gets them, and the import
contract "nothing shipped imports what stays outside the wheel" (pyproject.toml) keeps the
shipped code from needing them."""
from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, find_packages

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {"coordinator", "records", "migration", "ops", "members"}


def shipped_packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # pyproject-based configuration finds namespace packages unless told otherwise.
    find = find_namespace_packages if config.get("namespaces", True) else find_packages
    return find(where=str(REPO), include=config.get("include", ("*",)), exclude=config.get("exclude", ()))


def test_the_wheel_ships_the_five_packages_and_nothing_of_fuzz_bench_scripts_or_tests():
    packages = shipped_packages()
    assert {p.split(".")[0] for p in packages} == SHIPPED
    assert "ops.deploy" in packages and "coordinator.upstream" in packages, "subpackages are found too"
    for outside in ("fuzz", "bench", "scripts", "tests", "support"):
        assert not [p for p in packages if p == outside or p.startswith(outside + ".")], outside


def test_the_console_script_is_the_coordinators_cli():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"kcoord": "coordinator.cli:main"}


def test_package_data_covers_the_rehearsals_java_sources():
    """The rehearsals compile their Java members at run time, so every .java under
    migration/rehearse must match a package-data pattern or the wheel's rehearsal breaks."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    base = REPO / "migration" / "rehearse"
    sources = sorted(base.rglob("*.java"))
    assert sources, "the rehearsals ship Java sources"
    globs = patterns["migration.rehearse"]
    missing = [str(s.relative_to(base)) for s in sources if not any(s.relative_to(base).match(g) for g in globs)]
    assert missing == [], f"not in the wheel: {missing}"
