"""The task's own acceptance tests for quicksort.py: seeded into the workspace, read-only for every role.

`run_pytest` runs them beside the Specialist's tests, so the goal's promises (sorted, a new list every
time, the input untouched) are checked whatever tests the Specialist chose to write. Each failure says
what was called, what came back and what the goal asks, in the same words on every run.
"""

import random

from quicksort import quicksort


def sort_of(items):
    """quicksort's result for a copy of `items`, which must be a plain list: a list subclass could answer
    every comparison with True."""
    got = quicksort(list(items))
    assert type(got) is list, f"quicksort returned a {type(got).__name__}, not a list"
    return got


CASES = [[], [1], [1, 2, 3], [3, 2, 1], [2, 1, 2, 1, 2], [5, -1, 0, -1, 5], [0.5, -2.25, 3.0]]


def test_the_result_is_sorted():
    wrong = [
        f"quicksort({items!r}) returned {got!r}; the goal asks for {sorted(items)!r}"
        for items in CASES
        if (got := sort_of(items)) != sorted(items)
    ]
    assert not wrong, "; ".join(wrong)


def test_a_new_list_is_returned_for_every_input():
    same = [items for items in ([], [7], [3, 1, 2]) if quicksort(items) is items]
    assert not same, (
        f"quicksort returned the input list itself for {', '.join(map(repr, same))}; the goal asks for a new "
        "list for every input, an empty or one-item list included (return a copy, such as list(items))"
    )


def test_the_input_is_left_untouched():
    items = [3, 1, 2, 3, 0]
    quicksort(items)
    assert items == [3, 1, 2, 3, 0], f"quicksort changed its input [3, 1, 2, 3, 0] into {items!r}"


def test_100_random_items_match_sorted():
    rng = random.Random(29)
    items = [rng.randint(-50, 50) for _ in range(100)]
    got = sort_of(items)
    assert len(got) == 100, f"quicksort of 100 random items returned {len(got)} items: values were lost or added"
    assert got == sorted(items), "quicksort of 100 random items returned them in another order than sorted()"
