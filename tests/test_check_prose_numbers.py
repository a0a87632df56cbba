"""tools/check_prose_numbers.py: which prose numbers count, and when an output shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_prose_numbers as cpn  # noqa: E402


def numbers(markdown: str) -> list[str]:
    return [n.text for n in cpn.prose_numbers(markdown)]


def code(source: str, output: str = "") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if output:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    return cell


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text)


def check(tmp_path: Path, *cells) -> list[cpn.Violation]:
    path = tmp_path / "03_chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=list(cells)), path)
    return cpn.check_notebook(path)[0]


def test_measured_numbers_are_found():
    text = ("Accuracy rose to 73.4% (from 0.43), the loss to 2.40 nats, 63,119,496 parameters, "
            "about 63 million, 6.9× slower, a range 0.75-0.78, and −0.5 after 15 steps.")
    assert numbers(text) == ["73.4%", "0.43", "2.40", "63,119,496", "63 million", "6.9×",
                             "0.75", "0.78", "−0.5", "15"]


@pytest.mark.parametrize("text", [
    "Math $x = 0.43$ and $$y = 2.40$$ and $a_1 =\n 12.5$ stay out.",
    "Code `lr = 0.001`, roles {cite:p}`vaswani2017attention` and {term}`d_ff 2048` stay out.",
    "# Chapter 12.5 heading\n## 0.43 in a heading",
    "Links [read this](https://example.com/0.43/12.5) and <https://x.org/2.40> stay out.",
    "<!-- a comment 0.43 --> <span style='width: 12.5px'>text</span>",
    "1. first item\n2. second item\n10. tenth item",
    "Glued: Q9, fp16, BLEU-4, x0, 3rd, 2D, v0.1.0, W_12, 1/3 and 2/5.",
    "Years: Vaswani et al. 2017, Liu et al. 2020.",
    "Small counts: 3 seeds, 4 heads, 8 layers, head 0, rows 9-63.",
    "See chapter 9, section 2.1, figure 12, table 3, equation 14, exercises 2 and 11, Python 3.11.",
    "Arithmetic: 4·512² + 4·512, 2 × 128, 10⁻⁹, 2^16.",
    "```python\nx = 0.43\n```\n```{math}\n12.5\n```",
    "```{exercise}\n:label: ch03-q12\n:class: dropdown\nNo number here.\n```",
])
def test_what_is_not_a_measurement(text):
    assert numbers(text) == []


def test_directive_bodies_are_prose_but_code_inside_them_is_not():
    text = ("````{solution} ch04-two\n:class: dropdown\nWe reached 0.39 at step 300.\n"
            "```python\nsteps = 400\n```\nThen 0.97.\n````")
    assert numbers(text) == ["0.39", "300", "0.97"]


@pytest.mark.parametrize(("prose", "output", "shown"), [
    ("73.4%", "0.734", True),
    ("73.4%", "exact match 73.4%", True),
    ("0.43", "0.425", True),  # half-way: either rounding
    ("0.42", "0.425", True),
    ("73.4%", "0.738", False),
    ("0.43", "0.4312", True),
    ("0.43", "0.4361", False),
    ("2.40", "2.4", True),
    ("2.40", "2.404", True),
    ("61%", "61%", True),
    ("0.61", "is 61% of", True),
    ("63 million", "63,119,496 parameters", True),
    ("65 million", "63,119,496 parameters", False),
    ("13,705", "13705", True),
    ("600 steps", "612 steps", False),
    ("about 600 steps", "612 steps", True),
    ("−0.5", "-0.5", True),
    ("1.2e-07", "max diff 1.2e-07", True),
    ("6.9×", "ratio 6.94", True),
])
def test_matching_tolerates_formatting_but_not_other_values(tmp_path, prose, output, shown):
    violations = check(tmp_path, code("print(x)", output), md(f"We measured {prose} here."))
    assert (violations == []) is shown, violations


def test_outputs_count_only_in_their_own_section(tmp_path):
    cells = [
        md("## Experiment A"), code("a()", "accuracy 0.734\n"), md("A reached 0.73."),
        md("## Experiment B"), code("b()", "accuracy 0.512\n"),
        md("B reached 0.51, below the 0.73 of A."),
        md("Text above a heading stays in B: 0.51.\n\n## Experiment C\nC quotes 0.73."),
    ]
    violations = check(tmp_path, *cells)
    assert [(v.cell, v.number) for v in violations] == [(5, "0.73"), (6, "0.73")]
    assert "no output of its section" in violations[0].problem
    # a recap section (exercises, summary, what we found) sees the whole chapter
    recap = md("## What we found\nA reached 0.73 and B 0.51.")
    assert check(tmp_path, *cells[:5], recap) == []


def test_code_counts_only_for_exactly_the_number_it_writes(tmp_path):
    cells = [code("STEPS = 600\nLR = 0.751")]
    assert check(tmp_path, *cells, md("We train for 600 steps at rate 0.751.")) == []
    violations = check(tmp_path, *cells, md("We train for about 0.75 of the time."))
    assert [v.number for v in violations] == ["0.75"]


def test_marks_excuse_listed_numbers_with_a_reason(tmp_path):
    marked = md("The paper reports 28.4 BLEU and 65 million parameters, we saw 0.43.\n"
                "<!-- not measured: 28.4, 65 million (the paper's Table 3) -->")
    violations = check(tmp_path, code("f()", "0.43"), marked)
    assert violations == []
    no_reason = md("The paper reports 28.4 BLEU.\n<!-- not measured: 28.4 -->")
    problems = [v.problem for v in check(tmp_path, no_reason)]
    assert len(problems) == 2 and "(reason)" in problems[0] and "no output" in problems[1]
    stale = md("The paper reports 28.4 BLEU.\n<!-- not measured: 28.4, 3.5 (the paper) -->")
    [violation] = check(tmp_path, stale)
    assert violation.number == "3.5" and "no such checked number" in violation.problem


def test_main_reports_and_exits(tmp_path, capsys):
    path = tmp_path / "07_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[code("f()", "loss 1.234"),
                                                   md("Loss 1.23, then 4.56.")]), path)
    assert cpn.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "07_x.ipynb cell 1" in out and "'4.56'" in out and "1 prose number(s)" in out
    assert cpn.main(["--json", str(path)]) == 1
    [record] = json.loads(capsys.readouterr().out)
    assert record["number"] == "4.56" and record["cell"] == 1
    assert cpn.main(["--all", str(path)]) == 1
    out = capsys.readouterr().out
    assert "'1.23': shown by an output" in out and "'4.56': NOT SHOWN" in out
    nbformat.write(nbformat.v4.new_notebook(cells=[code("f()", "loss 1.234"),
                                                   md("Loss 1.23.")]), path)
    assert cpn.main([str(path)]) == 0
