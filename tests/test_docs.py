"""The documentation: an API entry for every public name, the README as a
landing page, and every Python block of the README and the site run."""

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
MODULES = (
    "layers",
    "models",
    "training",
    "decoding",
    "data",
    "export",
    "pretrained",
    "metrics",
    "plots",
    "distribute",
)

SLOW_SECONDS = 10  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 700  # (2 cores; the summed memory of its processes)


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _nav_pages():
    """The site's pages in mkdocs.yml's navigation order."""
    return re.findall(r"^\s*- (?:[^:\n]+: )?([\w/.-]+\.md)\s*$", _read("mkdocs.yml"), re.M)


def _blocks(text):
    """The Python blocks of a page, dedented (a block in a list item is
    indented as the item)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_has_an_api_entry(module):
    mod = importlib.import_module(f"seqkeras.{module}")
    assert mod.__all__, f"seqkeras.{module} has no __all__"
    page = _read("docs", "api", f"{module}.md")
    # `seqkeras.export.onnx.onnx`: a function named as its submodule is
    # entered where it is defined (docs/gen_api.py)
    entries = re.findall(rf"^::: seqkeras\.{module}\.(?:[\w.]+\.)?(\w+)$", page, re.M)
    missing = [n for n in mod.__all__ if n not in entries]
    stale = [n for n in entries if n not in mod.__all__]
    assert not missing and not stale, (
        f"docs/api/{module}.md: no entry for {missing}, entries for non-public {stale}; "
        "run `python docs/gen_api.py`"
    )


def _documented_arguments(doc):
    """The names an "Args:" section of `doc` (dedented) lists, or None
    when it has none; `a, b: ...` lists both."""
    found = re.search(r"^([ \t]*)Args:[ \t]*$", doc, re.M)
    if not found:
        return None
    indent, names = len(found.group(1)), set()
    for line in doc[found.end() :].splitlines()[1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth <= indent:
            break
        item = re.match(r"\s*\**([\w, ]+?)(\s*\(.*?\))?:\s", line + " ")
        if item and depth == indent + 4:
            names |= {n.strip() for n in item.group(1).split(",")}
    return names


@pytest.mark.parametrize("module", MODULES)
def test_every_public_callable_documents_each_argument(module):
    """Each public function's and class's (its own `__init__`'s)
    parameters are in its "Args:" section; deprecated spellings (default
    `UNSET`) and `*args`/`**kwargs` aside."""
    import inspect

    from seqkeras.layers.validation import UNSET

    mod = importlib.import_module(f"seqkeras.{module}")
    missing = {}
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if inspect.isclass(obj) and "__init__" not in vars(obj):
            continue  # documented where its __init__ is
        try:
            signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
        except (TypeError, ValueError):
            continue
        params = [
            p.name
            for p in signature.parameters.values()
            if p.name != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            and p.default is not UNSET
        ]
        documented = _documented_arguments(inspect.getdoc(obj) or "")
        left = params if documented is None else [p for p in params if p not in documented]
        if left:
            missing[name] = left
    assert not missing, f"seqkeras.{module}: parameters without an Args entry: {missing}"


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="the documentation tools are not installed (pip install '.[docs]')",
)
def test_the_built_api_pages_show_public_names_only(tmp_path):
    """`mkdocs build --strict`, then every API page: no raw `:::` line,
    every entry's anchor a public name (or a member of a public class or
    module, e.g. `seqkeras.data.tokens`), "Call arguments:" a list,
    and each Returns section one item (not a description split into false
    items at its line breaks)."""
    import inspect
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "--site-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        check=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    for module in MODULES:
        mod = importlib.import_module(f"seqkeras.{module}")
        with open(tmp_path / "api" / module / "index.html", encoding="utf-8") as f:
            html = f.read()
        assert ":::" not in html, module
        wrong = []
        for anchor in set(re.findall(rf'id="seqkeras\.{module}\.([\w.]+)"', html)):
            head, *rest = anchor.split(".")
            public = head in mod.__all__
            obj = getattr(mod, head, None)
            member = inspect.isclass(obj) or inspect.ismodule(obj)  # its members
            if not (public and (not rest or rest == [head] or member)):
                wrong.append(anchor)
        assert not wrong, f"api/{module}: entries for names that are not public: {sorted(wrong)}"
        returns = re.findall(r"Returns:</span></p>\s*<ul>(.*?)</ul>", html, re.S)
        assert returns or module in ("layers",), module
        split = [r for r in returns if r.count("<li") > 1]
        assert not split, f"api/{module}: {len(split)} Returns sections split into items"
        # a layer's "Call arguments:" section: a list, as "Args:" (the
        # extension docs/griffe_extensions.py), not one paragraph
        sections = sum(
            bool(re.search(r"^\s*Call arguments:\s*$", getattr(mod, n).__doc__ or "", re.M))
            for n in mod.__all__
        )
        # a "Raises" section for each public name the error-input registry
        # has entries for (docs/api/raises.json), at least
        with open(os.path.join(DOCS, "api", "raises.json"), encoding="utf-8") as f:
            registry = [v["name"] for v in json.load(f).values()]
        raising = sum(n.startswith(f"seqkeras.{module}.") for n in registry)
        assert html.count(">Raises:<") >= raising, (module, html.count(">Raises:<"), raising)
        listed = len(re.findall(r"Call arguments:</span></p>\s*<ul>", html))
        assert listed == sections, f"api/{module}: {sections - listed} Call arguments unlisted"
    # the guides link their first mention of each public name to its entry
    # (the hook docs/api_links.py): one such link for each name a guide
    # mentions in inline code
    spec = importlib.util.spec_from_file_location("api_links", os.path.join(DOCS, "api_links.py"))
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    for page in _nav_pages():
        if page.startswith("api/"):
            continue
        expected = hook.link(_read("docs", page)).count("][seqkeras.")
        built = "index.html" if page == "index.md" else f"{page[:-3]}/index.html"
        with open(tmp_path / built, encoding="utf-8") as f:
            html = f.read()
        found = set(re.findall(r'href="[^"]*api/\w+/#(seqkeras\.[\w.]+)"', html))
        assert len(found) >= expected, (page, expected, sorted(found))
    assert hook.NAMES["generate"] == "seqkeras.models.generate"
    assert hook.NAMES["tflite"] == "seqkeras.export.tflite.tflite"
    # the version this site documents, and the changelog (CHANGELOG.md)
    import seqkeras

    assert f"seqkeras {seqkeras.__version__}" in (tmp_path / "index.html").read_text("utf-8")
    changelog = (tmp_path / "changelog" / "index.html").read_text("utf-8")
    assert "Unreleased" in changelog and "--8&lt;--" not in changelog


#: docs/ pages the site leaves out (mkdocs.yml's exclude_docs): the
#: benchmarks' lab notebook, read in the repository
NOT_ON_THE_SITE = {"benchmarks/history.md"}


def test_every_page_is_in_the_navigation():
    nav = set(_nav_pages())
    pages = {
        os.path.relpath(os.path.join(root, f), DOCS)
        for root, _, files in os.walk(DOCS)
        for f in files
        if f.endswith(".md")
    } - NOT_ON_THE_SITE
    assert pages == nav, f"not in mkdocs.yml's nav: {pages - nav}; missing files: {nav - pages}"


def test_readme_is_a_landing_page():
    readme = _read("README.md")
    assert len(readme.splitlines()) < 250
    for page in ["README.md", "BENCHMARKS.md"] + [os.path.join("docs", p) for p in _nav_pages()]:
        found = re.findall(r".{30}\bissues? \d+.{0,30}", _read(page), re.I)
        assert not found, f"{page} names issue numbers: {found}"
    for link in re.findall(r"\]\(((?:docs/)?[\w/.-]+\.md)", readme):
        assert os.path.exists(os.path.join(ROOT, link)), f"README links to a missing {link}"


def _run(blocks, where, namespace):
    for block in blocks:
        if block.startswith("# needs "):
            continue  # a checkpoint package (the release check runs the README's) or a server
        exec(compile(block, where, "exec"), namespace)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """The README's Python blocks, in order in one namespace."""
    blocks = _blocks(_read("README.md"))
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    namespace = {}
    _run(blocks, "README.md", namespace)
    assert os.path.exists("saved_models/reverser-tflite/1/model.tflite")
    # the docker + curl block after them: the curl's request, answered by
    # the signature it names in a new process (CI has no Docker)
    script = os.path.join(ROOT, ".ci", "readme_shell.py")
    bin_dir = os.path.dirname(sys.executable)
    result = subprocess.run(
        [sys.executable, script, os.path.join(ROOT, "README.md"), "serve-reverser", bin_dir, "."],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "(answered by generate of saved_models/reverser/1)" in result.stdout, result.stdout


def test_site_python_examples_run(tmp_path, monkeypatch):
    """Each guide's Python blocks in order, in a namespace of its own: a
    page runs alone, as a reader copies it. (getting-started.md runs in the
    release check instead, in a fresh environment with the `apps` extra's
    dependencies only: tests/test_release.py.)"""
    monkeypatch.chdir(tmp_path)
    pages, count = {}, 0
    for page in _nav_pages():
        if page.startswith("api/") or page == "getting-started.md":
            continue
        blocks = _blocks(_read("docs", page))
        count += len(blocks)
        pages[page] = {}
        _run(blocks, page, pages[page])
    assert count >= 12
    export = pages["guides/export.md"]
    assert "WHILE" in export["op_names"](export["flatbuffer"])
    assert np.asarray(pages["guides/decoding.md"]["ids"]).shape[:2] == (4, 10)


def test_getting_started_is_one_program():
    """getting-started.md's Python blocks compile, and each name a block
    uses comes from the page itself (it runs top to bottom alone)."""
    import ast
    import builtins

    source = "\n".join(_blocks(_read("docs", "getting-started.md")))
    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.comprehension):
            bound |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert used <= bound, f"getting-started.md uses names it never defines: {used - bound}"


def test_the_public_api_is_the_listed_one():
    """tests/public_api.txt lists every public name; a change to the API
    (a name added, removed or renamed) must be made there too, on purpose."""
    with open(os.path.join(ROOT, "tests", "public_api.txt"), encoding="utf-8") as f:
        listed = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    found = set()
    for module in MODULES:
        mod = importlib.import_module(f"seqkeras.{module}")
        found |= {f"seqkeras.{module}.{name}" for name in mod.__all__}
    assert found == listed, (
        f"public but not listed: {sorted(found - listed)}; "
        f"listed but not public: {sorted(listed - found)}"
    )


def test_renamed_and_moved_names_warn_and_still_work():
    import seqkeras.data
    import seqkeras.export
    import seqkeras.models
    import seqkeras.training

    with pytest.warns(DeprecationWarning, match="NotServableError"):
        assert seqkeras.export.NotServable is seqkeras.export.NotServableError
    with pytest.warns(DeprecationWarning, match="seqkeras.data.check_token_ids"):
        assert seqkeras.models.check_token_ids is seqkeras.data.check_token_ids
    with pytest.warns(DeprecationWarning, match="seqkeras.training.compile_model"):
        assert seqkeras.models.compile_model is seqkeras.training.compile_model
    for old, new in (("seq2seq", "recurrent_seq2seq"), ("bilm", "bi_language_model")):
        with pytest.warns(DeprecationWarning, match=f"seqkeras.models.{new}"):
            assert getattr(seqkeras.models, old) is getattr(seqkeras.models, new)
    with pytest.warns(DeprecationWarning, match="recurrent_language_model"):
        model = seqkeras.training.build_from_config(  # an old config.json still builds
            {"builder": "rnn_language_model", "arguments": {}, "sizes": {"vocab_size": 9}}
        )
    assert type(model).__name__ == "RecurrentLanguageModel"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        seqkeras.export.nothing  # noqa: B018
