"""The experiment interface (deqlab/experiments/base.py): an experiment class is refused at
creation without its presets, paper setting or paper record; task keys are file-safe; the
least-squares line fit against a closed form."""

import pytest

from deqlab._fit import linear_fit
from deqlab.experiments.base import Experiment, Task
from deqlab.papers import LING


def test_task_key_must_be_file_safe():
    with pytest.raises(ValueError, match=r"`Task.key` must be non-empty"):
        Task("a/b")


def test_linear_fit_recovers_a_line_and_r2():
    x = [0.0, 1.0, 2.0, 3.0]
    slope, intercept, r2 = linear_fit(x, [1.0 - 2.0 * t for t in x])
    assert slope == pytest.approx(-2.0) and intercept == pytest.approx(1.0) and r2 == 1.0
    _, _, r2 = linear_fit(x, [0.0, 1.0, 0.0, 1.0])
    assert r2 == pytest.approx(0.2)  # closed form: 1 − SS_res/SS_tot = 1 − 0.8/1
    with pytest.raises(ValueError, match="same length >= 2"):
        linear_fit([1.0], [1.0])


def test_an_experiment_must_declare_its_presets_paper_setting_and_paper_record():
    methods = {
        "tasks": lambda self, c: [],
        "run_task": lambda self, c, t, x: [],
        "plot": lambda self, c, r, d: [],
        "statements": lambda self, c, r: [],
        "slug": "x",
        "paper": LING,
    }
    presets = {"tiny": {}, "quick": {}, "paper": {}}
    with pytest.raises(TypeError, match=r"lacks the presets \['quick', 'paper'\]"):
        type("NoPresets", (Experiment,), {**methods, "presets": {"tiny": {}}})
    with pytest.raises(TypeError, match="NoSetting must declare its paper_setting"):
        type("NoSetting", (Experiment,), {**methods, "presets": presets})
    declared = {**methods, "presets": presets, "paper_setting": {}}
    for not_a_record in (None, "Ling et al., AISTATS 2023"):
        with pytest.raises(TypeError, match=r"`paper` must be a Paper record of deqlab\.papers"):
            type("NoPaper", (Experiment,), {**declared, "paper": not_a_record})
    with pytest.raises(TypeError, match="declare `slug`, not `name`"):
        type("Misnamed", (Experiment,), {**declared, "name": "hieu2022-x"})
    with pytest.raises(TypeError, match=r"`slug` must be a non-empty str .*got 'x y'"):
        type("Spaced", (Experiment,), {**declared, "slug": "x y"})
    reportless = {k: v for k, v in declared.items() if k not in ("plot", "statements")}
    with pytest.raises(TypeError, match="`report` must be a module with statements and plot"):
        type("NoReport", (Experiment,), reportless)
    cited = type("Declared", (Experiment,), {**declared, "where": "Figure 1"})
    assert cited.name == "ling2023-x"
    assert cited.paper_setting == {}
    assert cited.citation == f"{LING.full} (Figure 1)"
