"""The fast tier's selection rule (tests/conftest.py) on a known case."""

from conftest import fast_selection


def test_every_file_keeps_its_cheapest_test_then_the_budget_fills_by_time():
    seconds = {"a.py::x": 5.0, "a.py::y": 1.0, "b.py::z": 30.0, "a.py::w": 2.0, "c.py::v": 3.0, "c.py::u": 4.0}
    ids = [*seconds, "d.py::new"]
    keep = fast_selection(ids, seconds, budget=40.0)
    # cheapest per file (a.py::y 1, b.py::z 30, c.py::v 3 = 34 s), the unrecorded test, then a.py::w (36 s); u would
    # reach 40 and still fit; x (5) would pass the budget
    assert keep == {"a.py::y", "b.py::z", "c.py::v", "d.py::new", "a.py::w", "c.py::u"}
    assert fast_selection(ids, seconds, budget=0.0) == {"a.py::y", "b.py::z", "c.py::v", "d.py::new"}
