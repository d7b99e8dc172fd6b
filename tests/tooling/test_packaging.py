"""The wheel ships every subpackage of tfktopic.

pyproject.toml lists its packages by name (the pretrained models need a package-dir mapping,
which setuptools' automatic discovery does not combine with); a folder added to the tree but
not to that list installs a wheel whose imports fail, which an editable install hides.
"""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _packages_in_tree():
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "tfktopic").rglob("__init__.py")
    }


def test_every_package_in_the_tree_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    missing = _packages_in_tree() - listed
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {sorted(missing)}"


def test_every_listed_package_exists():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = config.get("package-dir", {})
    for name in config["packages"]:
        folder = ROOT / mapped[name] if name in mapped else ROOT.joinpath(*name.split("."))
        assert folder.is_dir(), f"pyproject.toml lists {name}, but {folder} does not exist"
