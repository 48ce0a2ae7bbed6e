"""Hieu (thesis, 2022), the monotone and convolutional DEQs: its theory and claims."""
