"""Words for lexical matching: one tokenizer shared by BM25 and the hashing embedder."""

from __future__ import annotations

import re

__all__ = ["stem", "tokenize", "words"]

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = """
a an and are as at be been but by can could did do does for from had has have how i if in into is it
its may might must no not of on or our should so than that the their them then there these they this
those to was we were what when where which while who why will with would you your
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def stem(word: str) -> str:
    """A light suffix stripper: enough to match `connections` with `connection` and `timeouts` with `timeout`.

    Deliberately small (no dictionary, no language model) so it is fast, deterministic and predictable.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix == "es" and not word.endswith(("ches", "shes", "sses", "xes")):
                continue  # "queues" -> "queue" via "s", not "queu"
            return word[: len(word) - len(suffix)] + keep
    return word


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words of `text`, stop words kept (for n-grams that span them)."""
    return _WORD.findall(text.lower())


def tokenize(text: str) -> list[str]:
    """Stemmed content words of `text`: what BM25 and the word features of the hashing embedder count."""
    return [stem(w) for w in words(text) if w not in _STOPWORDS]
