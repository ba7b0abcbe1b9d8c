"""The labels build-image writes into every image (`%labels`), all under `org.fabrikit.`.

`build-image` reads the definition hash back to tell whether an image is up to date;
`fabrikit doctor` reads the site, the flavour and the image's glibc. The keys live here once.
"""

from __future__ import annotations

from collections.abc import Mapping

from .validate import label_value

LABEL_VERSION = "org.fabrikit.version"
LABEL_SITE = "org.fabrikit.site"
LABEL_FLAVOUR = "org.fabrikit.flavour"
LABEL_TEMPLATE = "org.fabrikit.template"
LABEL_BUILD_ARGS = "org.fabrikit.build-args"  # JSON object of every {{ }} value used
LABEL_HASH = "org.fabrikit.definition-sha256"
LABEL_GLIBC = "org.fabrikit.glibc"  # written by %post (containers/common/post-common.sh)


def labels_block(labels: Mapping[str, str]) -> str:
    """`%labels` lines. Each value is checked to survive Apptainer's reading of the line
    unchanged (one line, no surrounding blanks, no `{{ }}`): a line break in a value would
    otherwise start a new section of the definition file."""
    return "\n".join(f"{key} {label_value(value, f'label {key}')}" for key, value in labels.items())
