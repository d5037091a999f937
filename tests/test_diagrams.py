"""The diagrams' code still draws every diagram, at the size of the committed PNG, and not blank."""
import struct
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import diagrams  # noqa: E402
from diagrams.lesson10 import TOY  # noqa: E402
from diagrams.style import save_png  # noqa: E402

PNG = Path(__file__).resolve().parents[1] / "diagrams" / "png"


def png_size(path):
    with open(path, "rb") as f:
        header = f.read(24)
    return struct.unpack(">II", header[16:24])


@pytest.mark.parametrize("name", diagrams.NAMES)
def test_the_code_draws_the_committed_diagram(name, tmp_path):
    import matplotlib.pyplot as plt
    from PIL import Image

    width, height, _ = save_png(diagrams.draw(name), tmp_path / f"{name}.png")
    plt.close("all")
    assert (width, height) == png_size(PNG / f"{name}.png"), \
        f"{name}: the code draws {width}x{height}, the committed PNG is {png_size(PNG / f'{name}.png')}: " \
        "run python tools/draw_diagrams.py"
    pixels = np.asarray(Image.open(tmp_path / f"{name}.png").convert("L"), dtype=float)
    assert pixels.std() > 10 and width <= 1000, f"{name} looks blank or too wide"


def test_the_beam_search_picture_shows_lesson_10s_toy_model():
    import ast
    import re

    import nbformat

    nb = nbformat.read(PNG.parents[1] / "solutions" / "10_translation_multi30k.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith(
        "from course_utils.decoding import beam_step as beam_step_reference"))
    lesson_toy = ast.literal_eval(re.search(r"toy = (\{.*?\})\n", source, re.S).group(1))
    assert lesson_toy == TOY, "the lesson's toy model and the diagram's differ: the trace would not match the picture"
