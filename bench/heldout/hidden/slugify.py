from _common import delivered

slugify = delivered("slug").slugify
cases = {
    "Hello World": "hello-world",
    "Hello, World!": "hello-world",
    "  Many   spaces here ": "many-spaces-here",
    "Python 3.11 Released": "python-3-11-released",
    "already-a-slug": "already-a-slug",
    "UPPER lower": "upper-lower",
    "A -- B": "a-b",
    "": "",
    "!!!": "",
    "Version2Go": "version2go",
}
wrong = {t: (slugify(t), want) for t, want in cases.items() if slugify(t) != want}
assert not wrong, wrong
print("slugify: ok")
