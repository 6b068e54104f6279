"""app/settings.py: one Settings, its BLOCKTRACE_* variables read once, documented in docs/settings.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from blocktrace.app import settings as settings_module
from blocktrace.app.settings import Settings, env_name, overridden, settings

SETTINGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_without_variables_every_setting_is_its_default() -> None:
    """An empty environment gives the documented defaults."""
    assert Settings.from_environ({}) == Settings()
    assert Settings().page_builds == (1000.0, 4.0) and Settings().pending_eager == 2


def test_variables_are_read_by_the_setting_s_type() -> None:
    """BLOCKTRACE_<NAME> sets a setting: a whole number, a number, or a pair of numbers with a comma."""
    read = Settings.from_environ({"BLOCKTRACE_PENDING_EAGER": "5", "BLOCKTRACE_REPORT_GAP": "2.5",
                                  "BLOCKTRACE_PAGE_BUILDS": "300, 4", "BLOCKTRACE_UNRELATED": "x"})
    assert read == dataclasses.replace(Settings(), pending_eager=5, report_gap=2.5, page_builds=(300.0, 4.0))


@pytest.mark.parametrize(("name", "value"), [("BLOCKTRACE_PENDING_EAGER", "2.5"),
                                             ("BLOCKTRACE_PAGE_BUILDS", "300"),
                                             ("BLOCKTRACE_REPORT_GAP", "soon")])
def test_a_value_of_the_wrong_type_is_refused_by_name(name: str, value: str) -> None:
    """A variable that cannot be read is an error naming it, not a default quietly kept."""
    with pytest.raises(ValueError, match=name):
        Settings.from_environ({name: value})


def test_the_environment_is_read_once(monkeypatch) -> None:
    """settings() reads the environment on its first call only: a variable set later changes nothing."""
    monkeypatch.setattr(settings_module, "_current", None)
    monkeypatch.setenv("BLOCKTRACE_PENDING_EAGER", "7")
    first = settings()
    monkeypatch.setenv("BLOCKTRACE_PENDING_EAGER", "9")
    assert settings() is first and first.pending_eager == 7


def test_overridden_lasts_for_its_block() -> None:
    """A test's values hold inside `overridden` and the settings before it come back after, even on an error."""
    before = settings()
    with pytest.raises(RuntimeError), overridden(pending_eager=11) as inside:
        assert settings() is inside and inside.pending_eager == 11
        assert inside.page_builds == before.page_builds
        raise RuntimeError
    assert settings() is before


def test_settings_cannot_be_changed_in_place() -> None:
    """The settings are read once and shared: nothing may assign to them afterwards."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings().pending_eager = 3  # type: ignore[misc]


def test_the_settings_page_documents_every_setting() -> None:
    """Each setting's environment variable appears in docs/settings.md's table, with its meaning."""
    text = SETTINGS_DOC.read_text(encoding="utf-8")
    start = text.index("## The settings object")
    end = text.find("\n#", start + 1)
    section = text[start:end if end != -1 else len(text)]
    for setting in dataclasses.fields(Settings):
        assert f"`{env_name(setting.name)}`" in section, setting.name
        assert setting.metadata["doc"], setting.name
