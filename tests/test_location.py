"""Where the default store is: the explicit path, FILEMEM_STORE, FILEMEM_HOME, else the
platform's user data folder, which is the folder platformdirs names (location.py writes the
POSIX rule out so that a cold command need not import it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs
import pytest

from filemem.location import default_store_path, resolve_store_path


@pytest.mark.parametrize("xdg", [None, "absolute", "relative/data", ""])
def test_the_user_data_folder_is_the_one_platformdirs_names(
        xdg: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg") if xdg == "absolute" else xdg)
    expected = platformdirs.user_data_dir("filemem", appauthor=False)
    assert default_store_path() == expected
    if sys.platform != "win32":
        assert expected.startswith(str(tmp_path))  # the case is what it says
    assert not os.path.exists(expected)  # naming the folder creates nothing


def test_the_environment_and_an_explicit_path_come_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FILEMEM_HOME", str(tmp_path / "home-store"))
    assert default_store_path() == str(tmp_path / "home-store")
    monkeypatch.setenv("FILEMEM_STORE", str(tmp_path / "store"))
    assert default_store_path() == str(tmp_path / "store")
    assert resolve_store_path(tmp_path / "given") == str(tmp_path / "given")
    assert resolve_store_path("") == str(tmp_path / "store")
