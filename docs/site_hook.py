"""An mkdocs hook (mkdocs.yml `hooks:`): the site's footer names the
version it documents (`seqkeras.__version__`, read from the source: the
package is not imported to build the site), and where the repository's
address is given (`SEQKERAS_REPO_URL`, mkdocs.yml's `repo_url`), each
page's edit button opens its Markdown file on the main branch."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version():
    with open(os.path.join(ROOT, "seqkeras", "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def on_config(config):  # the mkdocs hook
    config["copyright"] = f"seqkeras {version()}: the documentation of this version"
    if config.get("repo_url"):
        config["edit_uri"] = "edit/main/docs/"
    return config
