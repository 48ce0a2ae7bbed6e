"""Reports: matplotlib figures and the self-contained HTML report of a run."""
