from models.repetition import loop_cut

CYCLE = "- 8 stores\n- 420 employees\n- 180 million USD\n- 55% online\n"


def test_a_cycle_is_cut_after_its_first_round():
    text = CYCLE + "- 420 employees\n- 180 million USD\n- 55% online\n- 420 employees\n- 180"
    cut = loop_cut(text)
    assert cut is not None
    assert text[:cut] == CYCLE


def test_one_line_repeated_keeps_the_lines_before_it():
    text = (
        "- 11-29: 108 interactions\n- 11-29: 175 interactions\n" + "- 11-29: 108 interactions\n" * 5
    )
    assert text[: loop_cut(text)] == "- 11-29: 108 interactions\n- 11-29: 175 interactions\n"


def test_an_answer_without_a_loop_is_left_alone():
    text = (
        "You had **1,234** web interactions.\n\n| channel | count |\n|---|---|\n| web | 1,234 |\n\n"
        "- Queue at the checkout of Bend (2026-09-25)\n- Queue at the checkout of Bend (2026-11-15)\n"
    )
    assert loop_cut(text) is None
    # a line written twice is not yet a loop, nor are short separators written many times
    assert loop_cut("- same line\n- other\n- same line\n" + "---\n" * 5) is None


def test_only_complete_lines_count():
    assert loop_cut("- a loop line\n- a loop line\n- a loop line") is None
    assert loop_cut("- a loop line\n- a loop line\n- a loop line\n") == len("- a loop line\n")
