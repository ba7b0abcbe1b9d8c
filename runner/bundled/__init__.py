"""The data fabrikit ships: site profiles, definition templates and jobs.

Its subpackages are not folders of `runner/`: the build backend maps the checkout's
top-level `bindings/`, `containers/` and `jobs/` onto `runner.bundled.bindings`,
`runner.bundled.containers` and `runner.bundled.jobs` (pyproject.toml, `package-dir`). A
wheel carries copies under `runner/bundled/`; an editable install resolves the names to the
checkout's folders. Read them through `runner.resources`, never by path arithmetic.
"""
