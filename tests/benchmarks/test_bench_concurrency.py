"""The concurrency part's mechanics, with a scripted model that takes 0.2 s a call (the real
model's numbers come from `make bench`)."""

from __future__ import annotations

import pytest

from benchmarks.bench_concurrency import bench_concurrency, fit_answers, with_slots
from crow.app import open_local_app
from crow.settings import AppSettings
from models.testing_embed import HashEmbedder
from tests.demo_env import build_demo_env

ORG = "acme-outdoor"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    build_demo_env(var, interactions=500).close()
    settings = AppSettings.from_args(
        {
            "var_dir": str(var),
            "llm": {"backend": "custom", "factory": "testing.rule_model:rule_model_slow"},
        }
    )
    local = open_local_app(settings, HashEmbedder(), chat_store=True, fresh_chat_db=True)
    yield local
    local.close()


def test_levels_alternate_modes_and_every_answer_is_counted(app):
    out = bench_concurrency(app, ORG, levels=(1, 3), answers=lambda c: c + 1, progress=False)
    assert out["slots"] == {"on": 2, "off": 1}
    for mode in ("on", "off"):
        levels = out["levels"][mode]
        assert [lv["concurrency"] for lv in levels] == [1, 3]
        assert [lv["answers"] for lv in levels] == [2, 4]
        assert all(lv["errors"] == 0 and lv["answers_per_min"] > 0 for lv in levels)
        assert all(lv["p50_s"] >= 0.2 for lv in levels)  # a model call takes 0.2 s
    assert set(out["ratio_on_over_off"]) == {"1", "3"}
    assert set(out["load_s"]) == {"on", "off"}


def test_with_slots_sets_the_runtime_and_room_for_the_callers():
    s = with_slots(AppSettings.from_args({}), 1, 8)
    assert (s.llm.slots, s.llm.max_waiting) == (1, 8)
    assert s.timeouts.model_s >= 600  # a call may wait for seven answers before its own


def test_a_level_that_does_not_fit_the_time_allotted_is_left_out(app):
    out = bench_concurrency(
        app, ORG, levels=(1, 3), answers=lambda c: c + 1, allotted_s=0.0, progress=False
    )
    assert [lv["concurrency"] for lv in out["levels"]["on"]] == [1]  # the first always runs
    assert [lv["concurrency"] for lv in out["levels"]["off"]] == [1]
    assert out["answers_per_level"] == {"1": 2, "3": 0}
    assert "3 chats: no answers of 4" in out["reduced"]
    assert set(out["ratio_on_over_off"]) == {"1"}


def test_fit_answers_trims_to_one_question_per_chat_then_to_none():
    done = {
        "on": [{"wall_s": 80.0, "answers": 4}, {"wall_s": 40.0, "answers": 4}],  # latest: 10 s
        "off": [{"wall_s": 60.0, "answers": 4}],  # 15 s an answer
    }
    assert fit_answers(done, chats=4, wanted=8, left_s=200.0) == 8  # 8 x (10 + 15) s
    assert fit_answers(done, chats=4, wanted=8, left_s=199.0) == 4
    assert fit_answers(done, chats=4, wanted=8, left_s=99.0) == 0
