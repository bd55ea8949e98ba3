"""The README's examples run and print what the README says they print."""

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FIRST_EXAMPLE_BY_LINE = 120  # a reader meets code before the numbers and the theory


def _examples() -> list[str]:
    return re.findall(r"```pycon\n(.*?)```", README.read_text(), flags=re.S)


def test_the_first_example_comes_early_and_shows_every_kind_of_estimator():
    text = README.read_text()
    first = text[: text.index("```pycon")].count("\n") + 1
    assert first <= FIRST_EXAMPLE_BY_LINE
    examples = "\n".join(_examples())
    for name in ("SoftmaxAttentionClassifier", "SoftmaxAttentionDenoiser", "denoise_image_wiener"):
        assert name in examples


@pytest.mark.slow
def test_readme_examples_print_what_the_readme_shows():
    pytest.importorskip("skimage")  # the image example's sample image
    # one namespace for all blocks: later examples reuse earlier imports, as
    # a reader pasting them into one session would
    example = doctest.DocTestParser().get_doctest(
        "\n".join(_examples()), {}, "README.md", str(README), 0
    )
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(example, out=report.append)
    assert result.attempted > 0
    assert result.failed == 0, "".join(report)
