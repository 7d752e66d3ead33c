"""mypy checks all of pinmon: every module under ``pinmon/`` is in ``[tool.mypy] files``, and the packages
typed end to end (every function annotated) stay in the override that says so."""
import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

REPO = pathlib.Path(__file__).resolve().parents[1]


def mypy_config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]


def modules() -> list[str]:
    """Every module of pinmon, as a path from the repository's root."""
    return sorted(p.relative_to(REPO).as_posix() for p in (REPO / "pinmon").rglob("*.py"))


def checked(entries: list[str]) -> set[str]:
    """The modules that ``files`` names: each entry a file, a folder (all its modules) or a glob of them."""
    out = set()
    for entry in entries:
        for path in REPO.glob(entry):
            found = path.rglob("*.py") if path.is_dir() else [path]
            out.update(p.relative_to(REPO).as_posix() for p in found if p.suffix == ".py")
    return out


def outside(entries: list[str]) -> list[str]:
    covered = checked(entries)
    return [m for m in modules() if m not in covered]


def matches(pattern: str, module: str) -> bool:
    """mypy's override patterns as pinmon writes them: a module's name, or ``NAME.*`` (it and its submodules)."""
    assert "*" not in pattern.removesuffix(".*"), f"a pattern form this check does not read: {pattern}"
    if pattern.endswith(".*"):
        package = pattern[:-2]
        return module == package or module.startswith(package + ".")
    return module == pattern


def module_name(path: str) -> str:
    name = path.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def test_every_module_of_pinmon_is_in_mypys_files():
    missing = outside(mypy_config()["files"])
    assert missing == [], f"outside [tool.mypy] files in pyproject.toml: {missing}"


def test_the_check_finds_a_module_left_out():
    missing = outside(["pinmon/model", "pinmon/units.py"])
    assert "pinmon/export/server.py" in missing and "pinmon/__init__.py" in missing
    assert "pinmon/model/snapshot.py" not in missing and "pinmon/units.py" not in missing


def test_the_exporter_has_every_function_annotated():
    strict = [pattern for o in mypy_config()["overrides"] if o.get("disallow_untyped_defs")
              for pattern in o["module"]]
    exporter = [module_name(m) for m in modules() if m.startswith("pinmon/export/")]
    assert "pinmon.export" in exporter and "pinmon.export.families.base" in exporter
    loose = [m for m in exporter if not any(matches(p, m) for p in strict)]
    assert loose == [], f"outside the disallow_untyped_defs override: {loose}"
