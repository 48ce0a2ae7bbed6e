"""Theory toolkit: kernels, eigenvalues, conditions and bounds of the theorems, as pure functions of tensors."""
