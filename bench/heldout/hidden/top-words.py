from _common import delivered

top_words = delivered("words").top_words
text = "the cat and the hat. The cat sat! A bat, a cat."
assert list(top_words(text, 2)) == [("cat", 3), ("the", 3)], top_words(text, 2)
assert list(top_words(text, 4)) == [("cat", 3), ("the", 3), ("a", 2), ("and", 1)], top_words(text, 4)
assert list(top_words("", 3)) == []
assert list(top_words("one two two", 5)) == [("two", 2), ("one", 1)]
assert [tuple(p) for p in top_words("Don't stop", 3)] == [("don", 1), ("stop", 1), ("t", 1)]
print("top-words: ok")
