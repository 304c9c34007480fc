"""The benchmark harness (``python bench/run.py``); see bench/README.md."""
