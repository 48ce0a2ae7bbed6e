"""docs/verify.ipynb runs top to bottom in a fresh kernel (nbclient), checks a data set and
trains: its outputs hold the answers, the measured rate, the statements' frame and the page
with its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "verify.ipynb"


@pytest.mark.slow
def test_the_notebook_checks_a_data_set_and_trains(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on any error
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "Ling et al. 2023, Theorem 2: λ_0 ≥ mλ*/2: cannot be decided" in text
    assert "ours: measured rate (Φ(T)/Φ(0))^(1/T) at the η trained with" in text
    shown = [o.data for o in outputs if o.output_type == "execute_result"]
    assert "Theorem 1 (iii)" in shown[0]["text/html"] and "<table" in shown[0]["text/html"]
    assert "data:image/png;base64," in shown[1]["text/html"] and "image/png" in shown[1]
