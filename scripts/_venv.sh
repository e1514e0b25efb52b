# Shared by scripts/serve and scripts/test: make .venv once and install the project into it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# sqlite-vec (the vector stores' vectors on SQLite) is an extension sqlite3 must be able to load: some builds
# (pyenv's, by default) cannot, so the first Python found that can makes the venv; PYTHON overrides.
loads_extensions() { "$1" -c 'import sqlite3, sys; sys.exit(not hasattr(sqlite3.Connection, "enable_load_extension"))' 2>/dev/null; }
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    for candidate in python3 /usr/bin/python3 /usr/local/bin/python3; do
        if command -v "$candidate" >/dev/null && loads_extensions "$candidate"; then PYTHON="$candidate"; break; fi
    done
fi
# A venv made by a Python that cannot is made again.
if [ -x "$VENV/bin/python" ] && ! loads_extensions "$VENV/bin/python" && loads_extensions "$PYTHON"; then
    rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when pyproject.toml changed since the last install.
STAMP="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)-$1"
if [ ! -f "$STAMP" ]; then
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet -e "$ROOT$2"
    rm -f "$VENV"/.installed-*
    touch "$STAMP"
fi
