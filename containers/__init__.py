"""Marker: makes this folder the package runner.bundled.containers (see pyproject.toml, package-dir).

Kept so that an editable install (`pip install -e .`) can map the package name onto this
folder; setuptools' editable finder maps regular packages only. Holds no code.
"""
