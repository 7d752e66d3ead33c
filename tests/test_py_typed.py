"""pinmon ships its annotations (PEP 561): the ``py.typed`` marker is in the package and in the
package data an install copies."""
import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_the_marker_is_in_the_package_and_its_package_data():
    assert (REPO / "pinmon" / "py.typed").is_file()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["pinmon"]
