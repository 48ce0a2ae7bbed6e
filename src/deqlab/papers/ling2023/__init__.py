"""Ling et al. (AISTATS 2023), the over-parameterized ReLU DEQ: its theory and claims."""
