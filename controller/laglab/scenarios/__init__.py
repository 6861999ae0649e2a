"""Declarative experiments: scenario files, the runner, the results bundle and its report."""
