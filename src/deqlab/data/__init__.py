"""Datasets: synthetic generators, MNIST / Fashion-MNIST / CIFAR-10 / digits readers, downloads, preprocessing."""
