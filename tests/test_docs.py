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
            path, section = ROOT / "docs" / doc, " ".join(section.split())
            if path.is_file() and not any(section in h for h in headings(path)):
                missing.append(f'{where}: docs/{doc}, "{section}"')
    assert missing == [], missing
