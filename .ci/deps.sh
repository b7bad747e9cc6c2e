# Sourced by .ci/run: tools some tests need beyond Python and PostgreSQL.

# --- Node.js + npm for tests/server/test_js_*.py (the `langsmith` and `ai` npm packages) -------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  log "node/npm missing: installing them"
  apt_install nodejs npm
fi
if [ ! -f tests/server/js/node_modules/langsmith/package.json ] \
   || [ ! -f tests/server/js/node_modules/@ai-sdk/anthropic/package.json ]; then
  log "installing the JS SDK and the AI SDK for the server tests (tests/server/js)"
  (cd tests/server/js && npm install --no-audit --no-fund)
fi

# --- Chromium for the browser tests of the web UI (tests/ui); never `playwright install` -------
if ! command -v chromium >/dev/null; then
  log "chromium missing: installing it for the browser tests (tests/ui)"
  apt_install chromium
fi
