"""The repository stands alone: code cites ``docs/`` (never files outside the
repository), and every cited doc, rule number and section exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"DESIGN\.md|PITFALLS\.md|shared/cases|\.\./shared")
CITED_DOC = re.compile(r"docs/([\w.-]+\.md)")
CITED_RULE = re.compile(r"docs/kafka-rules\.md #(\d+)")
CITED_SECTION = re.compile(r'docs/([\w.-]+\.md), "([^"]+)"')


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [ROOT / f for f in out if (ROOT / f).is_file()]


def sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in tracked("*.py", "*.md", "*.yml", "*.yaml",
                                                                  "Makefile", "Dockerfile")]


def headings(doc: Path) -> set[str]:
    return {m.group(1).strip().strip("`") for m in re.finditer(r"^#+ (.+)$", doc.read_text(), re.M)}


def test_nothing_cites_files_outside_the_repository():
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p, text in sources() if p.name != "test_docs.py"
                 for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert offenders == [], offenders


def test_every_cited_doc_rule_and_section_exists():
    missing = []
    rules = {int(n) for n in re.findall(r'<a id="(\d+)"></a>', (ROOT / "docs/kafka-rules.md").read_text())}
    for p, text in sources():
        where = p.relative_to(ROOT)
        for doc in CITED_DOC.findall(text):
            if not (ROOT / "docs" / doc).is_file():
                missing.append(f"{where}: docs/{doc}")
        for n in CITED_RULE.findall(text):
            if int(n) not in rules:
                missing.append(f"{where}: docs/kafka-rules.md #{n}")
        for doc, section in CITED_SECTION.findall(text):
            path, section = ROOT / "docs" / doc, " ".join(section.replace("#", " ").split())
            if path.is_file() and not any(section in h for h in headings(path)):
                missing.append(f'{where}: docs/{doc}, "{section}"')
    assert missing == [], missing


#: Top-level folders of this repository a doc may name files or modules in.
OWN = ("alerting", "api", "bench", "deploy", "docs", "examples", "ops", "plait", "producers",
       "schedules", "sinks", "streams", "tests")
CITED_PATH = re.compile(r"`((?:%s)/[\w./-]+\.(?:py|js|html|css|ya?ml|md|json|toml|txt))(?::\d+)?`"
                        % "|".join(OWN))
CITED_NAME = re.compile(r"`((?:%s)(?:\.\w+)+)(?:\(\))?`" % "|".join(OWN))


def top_level_names(path: Path) -> set[str]:
    """What ``path`` (a module) defines at its top level: functions, classes, assignments, imports."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def named_module(dotted: str) -> tuple[Path, list[str]] | None:
    """The longest module of this repository ``dotted`` starts with (``a.b`` -> ``a/b.py`` or
    ``a/b/__init__.py``) and the parts after it; None when even the first part is no module."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path, parts[i:]
    return None


def test_files_and_code_names_the_docs_cite_exist():
    """README and docs/ name files of the repository (``sinks/values.py``) and its code
    (``alerting.agents.register_alerting``): each file exists, and each name a module of the
    repository starts is defined in it (its first part after the module: a function, class,
    constant or import). Names under no module of ours but a top-level package (config keys
    such as ``plait.delivery.timeout``, loggers, topics, event types) are not checked."""
    files = {p for p in tracked("*")}
    stale = []
    for doc in [ROOT / "README.md", *tracked("docs/*.md")]:
        text = doc.read_text(encoding="utf-8")
        for path in CITED_PATH.findall(text):
            if ROOT / path not in files and not (ROOT / path).exists():
                stale.append(f"{doc.relative_to(ROOT)}: {path}")
        for dotted in CITED_NAME.findall(text):
            found = named_module(dotted)
            if found is None:
                continue
            module, rest = found
            if module.parent == ROOT / dotted.split(".")[0] and module.name == "__init__.py":
                continue  # `plait.kafka`, `schedules.slots`: a logger, a topic, no module
            if rest and rest[0] not in top_level_names(module):
                stale.append(f"{doc.relative_to(ROOT)}: {dotted}")
    assert stale == [], stale
