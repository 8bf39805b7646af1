"""Fixed content of the code-hosting site's seed: namespaces, projects, file templates, texts.

The seeder (``db.py``) combines these with draws from a seeded ``random.Random``; nothing here
is random, so the catalogue of projects is stable across seeds and only the activity (commits,
issues, stars, config values) varies.
"""

from __future__ import annotations

from dataclasses import dataclass

# (username, full name, bio, location): the users with a documented login come first.
NAMED_USERS = (
    ("byteblaze", "Byte Blaze", "Full-stack tinkerer. I break things so you don't have to.", ""),
    ("sam.rivera", "Sam Rivera", "Maps, trails and tiny web apps.", "Denver, CO"),
    ("mei.tanaka", "Mei Tanaka", "Go and poetry, in that order.", "Osaka, Japan"),
    ("omar.haddad", "Omar Haddad", "Platform engineer, on call more often than not.", "Berlin"),
)

# Groups: (path, name, description, owner username or None for a generated user).
GROUPS = (
    ("acme-labs", "Acme Labs", "Products and services of Acme Labs.", "omar.haddad"),
    (
        "opendata",
        "Open Data Collective",
        "Open datasets about cities, collected by volunteers.",
        None,
    ),
    ("webtools", "Web Tools", "Small, accessible building blocks for the web.", "byteblaze"),
    ("infra", "Infrastructure", "Deployment, logging and monitoring.", "omar.haddad"),
    ("mobile", "Mobile Guild", "Apps for phones and tablets.", None),
    ("ml-research", "ML Research", "Models, datasets and experiments.", "mei.tanaka"),
    ("docs-hub", "Docs Hub", "Writing guides and handbooks.", None),
)


@dataclass(frozen=True)
class ProjectSpec:
    """A seeded project: where it lives, what it is, which file set it gets."""

    namespace: str
    path: str
    name: str
    kind: str  # python | js | go | shell | docs
    description: str
    topic: str  # a short noun phrase used in issue and commit texts


PROJECTS = (
    ProjectSpec(
        "byteblaze",
        "dotfiles",
        "dotfiles",
        "shell",
        "My personal configuration files for zsh, git and neovim.",
        "shell setup",
    ),
    ProjectSpec(
        "byteblaze",
        "pixel-journal",
        "Pixel Journal",
        "js",
        "A tiny static blog generator that renders Markdown posts into pixel-art themed pages.",
        "post rendering",
    ),
    ProjectSpec(
        "byteblaze",
        "weather-cli",
        "weather-cli",
        "python",
        "Command-line weather forecasts from public APIs, with caching and colour output.",
        "forecast output",
    ),
    ProjectSpec(
        "sam.rivera",
        "trail-mapper",
        "Trail Mapper",
        "js",
        "Plan hiking routes on an interactive map and export them as GPX.",
        "route export",
    ),
    ProjectSpec(
        "sam.rivera",
        "budget-buddy",
        "Budget Buddy",
        "python",
        "Personal finance tracker that imports bank CSV exports and categorises spending.",
        "CSV import",
    ),
    ProjectSpec(
        "mei.tanaka",
        "haiku-bot",
        "Haiku Bot",
        "python",
        "A chat bot that answers every message with a haiku.",
        "syllable counting",
    ),
    ProjectSpec(
        "mei.tanaka",
        "kanban-lite",
        "Kanban Lite",
        "go",
        "Self-hosted kanban board with a single binary and SQLite storage.",
        "board sync",
    ),
    ProjectSpec(
        "acme-labs",
        "ledger",
        "Ledger",
        "go",
        "Double-entry bookkeeping service with a REST API.",
        "journal entries",
    ),
    ProjectSpec(
        "acme-labs",
        "storefront",
        "Storefront",
        "js",
        "The web shop front end: product pages, cart and checkout.",
        "checkout flow",
    ),
    ProjectSpec(
        "acme-labs",
        "payments-gateway",
        "Payments Gateway",
        "go",
        "Card and wallet payments behind one API, with retries and idempotency keys.",
        "refund handling",
    ),
    ProjectSpec(
        "opendata",
        "city-bikes",
        "City Bikes",
        "python",
        "Collects bike-sharing station data from 40 cities and publishes daily snapshots.",
        "station snapshots",
    ),
    ProjectSpec(
        "opendata",
        "air-quality",
        "Air Quality Index",
        "python",
        "Hourly air quality measurements, cleaned and aggregated per city.",
        "sensor readings",
    ),
    ProjectSpec(
        "opendata",
        "transit-feeds",
        "Transit Feeds",
        "python",
        "Validators and converters for public transit timetables in GTFS format.",
        "feed validation",
    ),
    ProjectSpec(
        "webtools",
        "color-picker",
        "Color Picker",
        "js",
        "Accessible colour picker widget with contrast checking.",
        "contrast checks",
    ),
    ProjectSpec(
        "webtools",
        "markdown-preview",
        "Markdown Preview",
        "js",
        "Live Markdown preview for the browser with syntax highlighting.",
        "live preview",
    ),
    ProjectSpec(
        "webtools",
        "form-validator",
        "Form Validator",
        "js",
        "Declarative validation rules for plain HTML forms.",
        "error messages",
    ),
    ProjectSpec(
        "infra",
        "deploy-scripts",
        "Deploy Scripts",
        "shell",
        "Scripts that build, test and roll out our services.",
        "rollbacks",
    ),
    ProjectSpec(
        "infra",
        "log-shipper",
        "Log Shipper",
        "go",
        "Tails log files and ships them to the central log store in batches.",
        "batch uploads",
    ),
    ProjectSpec(
        "infra",
        "status-page",
        "Status Page",
        "go",
        "Public status page with incident history and uptime checks.",
        "uptime checks",
    ),
    ProjectSpec(
        "mobile",
        "recipe-app",
        "Recipe App",
        "js",
        "Cross-platform recipe app with offline shopping lists.",
        "shopping lists",
    ),
    ProjectSpec(
        "mobile",
        "fitness-tracker",
        "Fitness Tracker",
        "js",
        "Step counter and workout log for phones.",
        "workout log",
    ),
    ProjectSpec(
        "ml-research",
        "sentiment-models",
        "Sentiment Models",
        "python",
        "Training and evaluation code for review sentiment classifiers.",
        "evaluation metrics",
    ),
    ProjectSpec(
        "ml-research",
        "dataset-tools",
        "Dataset Tools",
        "python",
        "Utilities to split, deduplicate and document datasets.",
        "deduplication",
    ),
    ProjectSpec(
        "docs-hub",
        "style-guide",
        "Style Guide",
        "docs",
        "Writing style guide for our documentation and blog.",
        "word list",
    ),
    ProjectSpec(
        "docs-hub",
        "api-handbook",
        "API Handbook",
        "docs",
        "Handbook for designing and documenting HTTP APIs.",
        "pagination chapter",
    ),
)

# name, colour, description
LABELS = (
    ("bug", "#d9534f", "Something is broken"),
    ("feature", "#428bca", "A new capability"),
    ("documentation", "#5cb85c", "Docs and examples"),
    ("enhancement", "#8e44ad", "Improve something that works"),
    ("question", "#f0ad4e", "Needs an answer, not code"),
    ("good first issue", "#16a085", "Small and well described"),
    ("help wanted", "#2c3e50", "Maintainers would welcome a contribution"),
    ("performance", "#e67e22", "Speed and memory"),
    ("security", "#c0392b", "Security relevant"),
    ("ui", "#1abc9c", "User interface"),
)

ROLES = {10: "Guest", 20: "Reporter", 30: "Developer", 40: "Maintainer", 50: "Owner"}
"""GitLab access levels and their names."""

# Issue titles per label kind; {topic} is the project's topic, {thing} a generic noun.
ISSUE_TITLES = {
    "bug": (
        "Crash when {topic} runs with an empty config",
        "{Topic} fails on files with non-ASCII names",
        "Wrong timezone in {topic} timestamps",
        "Memory keeps growing during {topic}",
        "{Topic} ignores the --quiet flag",
        "Off-by-one error in {topic} pagination",
        "Unhandled exception after network timeout",
        "Broken link in the {topic} section of the README",
        "Tests fail on Windows because of path separators",
        "Race condition in {topic} under load",
        "Dark mode colours unreadable in {topic}",
        "Duplicate entries after retrying {topic}",
    ),
    "feature": (
        "Add export to CSV for {topic}",
        "Support environment variables in the config file",
        "Add a --dry-run option",
        "Allow custom templates for {topic}",
        "Add a health check endpoint",
        "Support multiple languages in {topic}",
        "Add keyboard shortcuts",
        "Add retry with exponential backoff to {topic}",
        "Provide a Docker image",
        "Show progress bar during {topic}",
    ),
    "documentation": (
        "Document the {topic} options",
        "Add a getting started guide",
        "Explain how to run the tests locally",
        "Fix typos in CONTRIBUTING",
        "Add examples for {topic}",
        "Describe the release process",
    ),
    "other": (
        "Upgrade dependencies to their latest versions",
        "Refactor {topic} into smaller modules",
        "Improve error messages of {topic}",
        "Reduce start-up time",
        "Set up continuous integration",
        "Is {topic} supposed to work offline?",
        "Clean up unused code in {topic}",
        "Speed up {topic} for large inputs",
        "Make {topic} configurable per user",
        "Add type hints to the public API",
    ),
}

ISSUE_BODIES = (
    "Steps to reproduce: run the latest release with default settings and watch {topic}. "
    "Expected it to finish normally.",
    "This came up in a discussion last week. It would make {topic} much easier to use.",
    "I looked into the code and the problem seems to be in the {topic} module.",
    "Several users asked for this. A first version could be small.",
    "Happens about one time in ten. Logs attached in the first comment.",
    "Proposal: keep the current behaviour as the default and add an option.",
)

COMMENTS = (
    "Thanks for the report, I can reproduce it.",
    "I'll take a look at this later this week.",
    "Could you share the exact version you are running?",
    "This is fixed on main, please try again.",
    "+1, we hit the same problem.",
    "Good idea. Would you like to open a merge request?",
    "I think this duplicates an older issue.",
    "Added a test case that shows the problem.",
    "Let's discuss this at the next sync.",
    "Looks good to me.",
    "Please rebase onto main before merging.",
    "Nice work, thanks!",
)

COMMIT_MESSAGES = (
    "Fix typo in README",
    "Add tests for {topic}",
    "Refactor {topic} helpers",
    "Update dependencies",
    "Improve error handling in {topic}",
    "Add configuration option for {topic}",
    "Remove unused imports",
    "Bump version",
    "Fix flaky test",
    "Document {topic}",
    "Speed up {topic}",
    "Initial commit",
    "Format code",
    "Add changelog entry",
    "Handle empty input in {topic}",
    "Rename variables for clarity",
    "Add logging to {topic}",
    "Fix off-by-one error",
    "Merge branch 'develop' into 'main'",
    "Clean up {topic} code",
)

MR_TITLES = (
    "Add {topic} settings page",
    "Fix {topic} crash on empty input",
    "Draft: rewrite {topic}",
    "Update README with usage examples",
    "Bump dependencies",
    "Add unit tests for {topic}",
    "Improve {topic} performance",
    "Refactor configuration loading",
    "Add CI pipeline",
    "Fix typos in docs",
    "Support dark mode",
    "Add {topic} metrics",
)

MR_BODIES = (
    "This merge request changes {topic}. Tested locally with the sample data.",
    "Closes an old issue. The change is small; please review the config part.",
    "First step of a larger refactoring. No behaviour change intended.",
    "Adds tests and fixes two edge cases found while writing them.",
)

PY_DEPS = ("requests", "click", "pydantic", "rich", "pandas", "numpy", "httpx", "pyyaml")
JS_DEPS = ("react", "lodash", "express", "axios", "dayjs", "leaflet", "marked", "zod")
LOG_LEVELS = ("debug", "info", "warning", "error")
THEMES = ("material", "readthedocs", "mkdocs")
