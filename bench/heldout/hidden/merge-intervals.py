from _common import delivered

merge = delivered("intervals").merge


def norm(result):
    return [list(pair) for pair in result]


assert norm(merge([[1, 3], [2, 6], [8, 10], [15, 18]])) == [[1, 6], [8, 10], [15, 18]]
assert norm(merge([[1, 4], [4, 5]])) == [[1, 5]]
assert norm(merge([[5, 6], [1, 2]])) == [[1, 2], [5, 6]]
assert norm(merge([])) == []
assert norm(merge([[1, 10], [2, 3], [4, 5]])) == [[1, 10]]
given = [[3, 4], [1, 2]]
merge(given)
assert given == [[3, 4], [1, 2]], "the input was changed"
print("merge-intervals: ok")
