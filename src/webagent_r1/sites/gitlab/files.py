"""Repository files of the seeded projects: a small, plausible tree per project kind.

:func:`repo_files` returns ``{path: content}`` for one project. Config files carry values
drawn from the seeded ``random.Random`` (ports, timeouts, versions), so questions such as
"what is the port in config/settings.yaml?" have answers that differ between projects.
"""

from __future__ import annotations

import random

from webagent_r1.sites.gitlab.content import JS_DEPS, LOG_LEVELS, PY_DEPS, THEMES, ProjectSpec

LICENSE = (
    "MIT License\n\nCopyright (c) {year} {owner}\n\n"
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this\n"
    "software, to deal in the Software without restriction, subject to the following\n"
    "conditions: the above copyright notice shall be included in all copies.\n\n"
    'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.\n'
)


def _version(rng: random.Random) -> str:
    return f"{rng.choice((0, 0, 1, 1, 2))}.{rng.randint(1, 19)}.{rng.randint(0, 9)}"


def _readme_and_license(
    spec: ProjectSpec, rng: random.Random, owner: str, install: str, run: str
) -> dict[str, str]:
    """The README (install and run commands) and the MIT LICENSE every repository has."""
    return {
        "README.md": _readme(spec, install, run),
        "LICENSE": LICENSE.format(year=rng.randint(2019, 2022), owner=owner),
    }


def _readme(spec: ProjectSpec, install: str, run: str) -> str:
    return (
        f"# {spec.name}\n\n{spec.description}\n\n"
        "## Installation\n\n"
        f"```\n{install}\n```\n\n"
        "## Usage\n\n"
        f"```\n{run}\n```\n\n"
        "## Contributing\n\n"
        "- Open an issue before large changes\n"
        "- Run the tests before sending a merge request\n"
        "- Keep commits small and focused\n\n"
        "## License\n\nMIT, see the LICENSE file.\n"
    )


def _python(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    pkg = spec.path.replace("-", "_")
    version = _version(rng)
    deps = sorted(rng.sample(PY_DEPS, 3))
    return {
        **_readme_and_license(
            spec, rng, owner, f"pip install {spec.path}", f"python -m {pkg} --help"
        ),
        ".gitignore": "__pycache__/\n*.pyc\n.venv/\ndist/\n.coverage\n",
        "pyproject.toml": (
            "[project]\n"
            f'name = "{spec.path}"\n'
            f'version = "{version}"\n'
            f'requires-python = ">=3.{rng.randint(8, 11)}"\n'
            "dependencies = [\n"
            + "".join(f'    "{d}>={rng.randint(1, 3)}.0",\n' for d in deps)
            + "]\n"
            "\n[project.scripts]\n"
            f'{spec.path} = "{pkg}.cli:main"\n'
        ),
        f"src/{pkg}/__init__.py": f'"""{spec.description}"""\n\n__version__ = "{version}"\n',
        f"src/{pkg}/config.py": (
            '"""Default settings; every one can be overridden in config/settings.yaml."""\n\n'
            f"DEFAULT_TIMEOUT = {rng.randint(5, 120)}\n"
            f"MAX_RETRIES = {rng.randint(1, 10)}\n"
            f"CACHE_TTL_SECONDS = {rng.choice((60, 300, 600, 900, 1800, 3600))}\n"
            f"BATCH_SIZE = {rng.choice((16, 32, 50, 64, 100, 128, 250, 500))}\n"
            f'DATA_DIR = "{rng.choice(("data", "var/data", "~/.cache", "/srv/data"))}/{pkg}"\n'
        ),
        f"src/{pkg}/cli.py": (
            "import argparse\n\n"
            f"from {pkg}.core.engine import run\n\n\n"
            "def main() -> None:\n"
            f'    parser = argparse.ArgumentParser(prog="{spec.path}")\n'
            '    parser.add_argument("--verbose", action="store_true")\n'
            "    args = parser.parse_args()\n"
            "    run(verbose=args.verbose)\n"
        ),
        f"src/{pkg}/core/__init__.py": "",
        f"src/{pkg}/core/engine.py": (
            f"from {pkg}.config import BATCH_SIZE, MAX_RETRIES\n"
            f"from {pkg}.core.utils import chunks\n\n\n"
            "def process(items: list) -> list:\n"
            "    out = []\n"
            "    for batch in chunks(items, BATCH_SIZE):\n"
            "        out.extend(batch)\n"
            "    return out\n\n\n"
            "def run(verbose: bool = False) -> None:\n"
            "    for attempt in range(MAX_RETRIES):\n"
            "        if verbose:\n"
            '            print(f"attempt {attempt + 1}")\n'
            "        process([])\n"
            "        return\n"
        ),
        f"src/{pkg}/core/utils.py": (
            "def chunks(items: list, size: int):\n"
            "    for i in range(0, len(items), size):\n"
            "        yield items[i : i + size]\n\n\n"
            "def slug(text: str) -> str:\n"
            '    return "-".join(text.lower().split())\n'
        ),
        "tests/test_engine.py": (
            f"from {pkg}.core.engine import process\n"
            f"from {pkg}.core.utils import slug\n\n\n"
            "def test_process_keeps_items():\n"
            "    assert process([1, 2, 3]) == [1, 2, 3]\n\n\n"
            "def test_slug():\n"
            '    assert slug("Hello World") == "hello-world"\n'
        ),
        "config/settings.yaml": (
            f"# Settings of {spec.name}\n"
            f"port: {rng.randint(30, 90) * 100 + rng.choice((0, 80, 88))}\n"
            f"workers: {rng.randint(2, 16)}\n"
            f"log_level: {rng.choice(LOG_LEVELS)}\n"
            f"max_upload_mb: {rng.choice((5, 10, 20, 25, 50, 100))}\n"
            f"region: {rng.choice(('eu-west-1', 'us-east-1', 'us-west-2', 'ap-south-1'))}\n"
        ),
        "docs/guide/getting-started.md": (
            f"# Getting started with {spec.name}\n\n"
            f"Install the package, then run `{spec.path} --help`.\n\n"
            "Settings live in config/settings.yaml.\n"
        ),
    }


def _js(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    version = _version(rng)
    deps = sorted(rng.sample(JS_DEPS, 3))
    comp = rng.choice(("Button", "Card", "Modal", "Toolbar", "Sidebar"))
    dep_lines = ",\n".join(
        f'    "{d}": "^{rng.randint(1, 18)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"' for d in deps
    )
    return {
        **_readme_and_license(spec, rng, owner, "npm install", "npm start"),
        ".gitignore": "node_modules/\ndist/\ncoverage/\n.env\n",
        "package.json": (
            "{\n"
            f'  "name": "{spec.path}",\n'
            f'  "version": "{version}",\n'
            '  "scripts": {\n'
            '    "start": "node src/index.js",\n'
            '    "test": "node --test tests/"\n'
            "  },\n"
            f'  "dependencies": {{\n{dep_lines}\n  }}\n'
            "}\n"
        ),
        "src/index.js": (
            f"import {{ {comp} }} from './components/{comp}.js';\n"
            "import { formatDate } from './utils/format.js';\n"
            "import config from '../config/default.json' assert { type: 'json' };\n\n"
            "export function start() {\n"
            f"  console.log(`{spec.name} listening on ${{config.port}}`);\n"
            f"  return {comp}({{ label: formatDate(new Date()) }});\n"
            "}\n"
        ),
        f"src/components/{comp}.js": (
            f"export function {comp}({{ label }}) {{\n"
            "  const el = document.createElement('div');\n"
            f"  el.className = '{comp.lower()}';\n"
            "  el.textContent = label;\n"
            "  return el;\n"
            "}\n"
        ),
        "src/utils/format.js": (
            "export function formatDate(d) {\n"
            "  return d.toISOString().slice(0, 10);\n"
            "}\n\n"
            "export function plural(n, word) {\n"
            "  return `${n} ${word}${n === 1 ? '' : 's'}`;\n"
            "}\n"
        ),
        "config/default.json": (
            "{\n"
            f'  "port": {rng.randint(30, 90) * 100 + rng.choice((0, 1, 80))},\n'
            f'  "apiTimeoutMs": {rng.choice((1000, 2500, 3000, 5000, 8000, 10000, 15000))},\n'
            f'  "retries": {rng.randint(1, 8)},\n'
            f'  "logLevel": "{rng.choice(LOG_LEVELS)}",\n'
            f'  "pageSize": {rng.choice((10, 12, 20, 24, 25, 30, 50))}\n'
            "}\n"
        ),
        "tests/format.test.js": (
            "import { test } from 'node:test';\n"
            "import assert from 'node:assert';\n"
            "import { plural } from '../src/utils/format.js';\n\n"
            "test('plural', () => {\n"
            "  assert.equal(plural(2, 'item'), '2 items');\n"
            "});\n"
        ),
    }


def _go(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    return {
        **_readme_and_license(
            spec,
            rng,
            owner,
            f"go install ./cmd/{spec.path}",
            f"{spec.path} -config config/config.yaml",
        ),
        ".gitignore": "bin/\n*.db\n",
        "go.mod": (
            f"module gitlab.example.com/{spec.namespace}/{spec.path}\n\n"
            f"go 1.{rng.randint(18, 21)}\n\n"
            "require (\n"
            f"\tgithub.com/mattn/go-sqlite3 v1.14.{rng.randint(10, 22)}\n"
            f"\tgopkg.in/yaml.v3 v3.0.{rng.randint(0, 1)}\n"
            ")\n"
        ),
        "Makefile": (
            f"build:\n\tgo build -o bin/{spec.path} ./cmd/{spec.path}\n\ntest:\n\tgo test ./...\n"
        ),
        f"cmd/{spec.path}/main.go": (
            "package main\n\n"
            "import (\n"
            '\t"log"\n\n'
            f'\t"gitlab.example.com/{spec.namespace}/{spec.path}/internal/server"\n'
            ")\n\n"
            "func main() {\n"
            "\tif err := server.Run(); err != nil {\n"
            "\t\tlog.Fatal(err)\n"
            "\t}\n"
            "}\n"
        ),
        "internal/server/server.go": (
            "package server\n\n"
            'import "net/http"\n\n'
            f"const DefaultPort = {rng.randint(30, 90) * 100 + rng.choice((0, 80, 90))}\n"
            f"const ReadTimeoutSeconds = {rng.choice((5, 10, 15, 30, 60))}\n"
            f"const MaxBodyBytes = {rng.choice((1, 2, 4, 8, 16))} << 20\n\n"
            "func Run() error {\n"
            "\treturn http.ListenAndServe(addr(), routes())\n"
            "}\n"
        ),
        "internal/server/routes.go": (
            "package server\n\n"
            'import "net/http"\n\n'
            "func routes() http.Handler {\n"
            "\tmux := http.NewServeMux()\n"
            '\tmux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {\n'
            '\t\tw.Write([]byte("ok"))\n'
            "\t})\n"
            "\treturn mux\n"
            "}\n"
        ),
        "internal/store/store.go": (
            "package store\n\n"
            'import "database/sql"\n\n'
            "type Store struct {\n\tdb *sql.DB\n}\n\n"
            "func Open(path string) (*Store, error) {\n"
            '\tdb, err := sql.Open("sqlite3", path)\n'
            "\treturn &Store{db: db}, err\n"
            "}\n"
        ),
        "config/config.yaml": (
            f"# {spec.name} configuration\n"
            f"listen: 0.0.0.0:{rng.randint(30, 90) * 100}\n"
            f"workers: {rng.randint(2, 32)}\n"
            f"log_level: {rng.choice(LOG_LEVELS)}\n"
            f"db_path: /var/lib/{spec.path}/{spec.path}.db\n"
            f"retention_days: {rng.choice((7, 14, 30, 60, 90, 365))}\n"
        ),
    }


def _shell(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    return {
        **_readme_and_license(spec, rng, owner, "./install.sh", "bin/deploy.sh staging"),
        "install.sh": (
            "#!/bin/sh\nset -e\n"
            f'PREFIX="${{PREFIX:-{rng.choice(("/usr/local", "$HOME/.local", "/opt"))}}}"\n'
            'cp -r bin "$PREFIX/"\n'
            'echo "installed to $PREFIX"\n'
        ),
        "bin/deploy.sh": (
            "#!/bin/sh\nset -eu\n"
            f"RETRIES={rng.randint(1, 6)}\n"
            f"TIMEOUT={rng.choice((30, 60, 90, 120, 300))}\n"
            'TARGET="${1:-staging}"\n'
            'echo "deploying to $TARGET"\n'
        ),
        "bin/lib/common.sh": (
            'log() {\n  printf \'%s %s\\n\' "$(date +%H:%M:%S)" "$*"\n}\n\n'
            'die() {\n  log "$*" >&2\n  exit 1\n}\n'
        ),
        "config/hosts.conf": (
            f"staging_host={rng.choice(('stage', 'staging', 'pre'))}{rng.randint(1, 9)}"
            ".example.com\n"
            f"production_host=prod{rng.randint(1, 9)}.example.com\n"
            f"ssh_port={rng.choice((22, 2222, 2200, 22022))}\n"
            f"keep_releases={rng.randint(3, 10)}\n"
        ),
        ".gitignore": "*.log\n.env\n",
    }


def _docs(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    return {
        **_readme_and_license(spec, rng, owner, "pip install mkdocs", "mkdocs serve"),
        "CONTRIBUTING.md": (
            "# Contributing\n\nOpen a merge request against main. One topic per merge request.\n"
        ),
        "mkdocs.yml": (
            f"site_name: {spec.name}\n"
            f"theme: {rng.choice(THEMES)}\n"
            f"edit_uri: edit/main/docs/\n"
            f"copyright: {rng.randint(2019, 2023)} {owner}\n"
            "nav:\n  - Home: index.md\n  - Guides: guides/writing.md\n"
        ),
        "docs/index.md": f"# {spec.name}\n\n{spec.description}\n",
        "docs/guides/writing.md": (
            "# Writing\n\n- Use the active voice\n- Prefer short sentences\n"
            f"- Keep paragraphs under {rng.randint(4, 8)} sentences\n"
        ),
        "docs/reference/glossary.md": (
            "# Glossary\n\nendpoint: a URL that accepts requests\nidempotent: safe to repeat\n"
        ),
    }


KINDS = {"python": _python, "js": _js, "go": _go, "shell": _shell, "docs": _docs}


def repo_files(spec: ProjectSpec, rng: random.Random, owner: str) -> dict[str, str]:
    """The files of ``spec``'s repository (``{path: content}``), values drawn from ``rng``."""
    return KINDS[spec.kind](spec, rng, owner)
