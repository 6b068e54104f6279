"""app/server/build_pacing.py: the process's build queue takes its numbers from the server's settings."""

from __future__ import annotations

from blocktrace.app.server.build_pacing import pace_from_settings
from blocktrace.app.settings import Settings, overridden
from blocktrace.explorables.components import build_turns


def test_the_build_queue_takes_its_numbers_from_the_settings(monkeypatch):
    """Each BLOCKTRACE_BUILD_* setting reaches the process's pacer, so the settings are its one source."""
    monkeypatch.setattr(build_turns, "PACER", build_turns.Pacer())
    with overridden(build_gap=0.05, build_gap_share=2.0, build_behind=0.03, build_busy_share=0.4, build_max_rest=1.5,
                    build_stuck=9.0):
        pace_from_settings()
    pacer = build_turns.PACER
    assert (pacer.gap_s, pacer.share, pacer.behind_s, pacer.busy_share, pacer.max_rest_s, pacer.stuck_s) == (
        0.05, 2.0, 0.03, 0.4, 1.5, 9.0)


def test_the_settings_defaults_are_the_ones_build_turns_documents():
    """The settings' defaults are the numbers build_turns documents for a Pacer: one set of numbers, not two."""
    defaults = Settings()
    assert (defaults.build_gap, defaults.build_gap_share, defaults.build_behind, defaults.build_busy_share,
            defaults.build_max_rest, defaults.build_stuck) == (
        build_turns.GAP_S, build_turns.SHARE, build_turns.BEHIND_S, build_turns.BUSY_SHARE, build_turns.MAX_REST_S,
        build_turns.STUCK_S)
