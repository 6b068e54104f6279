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


def test_the_race_runner_keeps_its_races_in_the_servers_data_folder(tmp_path):
    """`blocktrace serve` hands the runner a store in its data folder's races/, of the size the settings say; none
    without a data folder or with a size of 0."""
    from argparse import Namespace

    from blocktrace.app.serve import race_data_dir
    from blocktrace.app.server.build_pacing import races_from_settings
    from blocktrace.explorables.train_the_block.view import runner

    try:
        stores = []
        for data_dir, megabytes in ((tmp_path, 5.0), (None, 5.0), (tmp_path, 0.0)):
            with overridden(race_store_mb=megabytes):
                races_from_settings(data_dir)
                stores.append(runner().store)
    finally:
        runner.configure()
    assert stores[0].directory == tmp_path / "races" and stores[0].limit_bytes == 5_000_000
    assert stores[1:] == [None, None]
    assert race_data_dir(Namespace(data_dir=None), None) is None
    assert race_data_dir(Namespace(data_dir=str(tmp_path)), None) == tmp_path.resolve()
