"""The phone's limits: one set of defaults, the phone's, whichever keys a config sets."""

from __future__ import annotations

from hearth.companion.settings import PHONE_LIMITS, load_settings, set_setting


def test_setting_one_limit_keeps_the_phones_defaults_for_the_rest(tmp_path) -> None:
    set_setting(tmp_path, "limits.deadline_s", "60")
    limits = load_settings(tmp_path).limits
    assert limits.deadline_s == 60
    assert limits.model_dump(exclude={"deadline_s"}) == PHONE_LIMITS.model_dump(
        exclude={"deadline_s"}
    )


def test_a_partial_limits_table_changes_only_its_own_keys(tmp_path) -> None:
    (tmp_path / "config.toml").write_text("[limits]\nmax_rounds = 5\n")
    limits = load_settings(tmp_path).limits
    assert (limits.max_rounds, limits.max_steps) == (5, PHONE_LIMITS.max_steps)


def test_the_defaults_are_sized_for_multi_step_work(tmp_path) -> None:
    limits = load_settings(tmp_path).limits
    assert limits.max_steps >= 20 and limits.max_rounds >= 10
