# openapi.mk - the OpenAPI document's tools (worker/openapi/openapi.json).
#
#   make openapi-deps   npm ci of ops/openapi/ (pinned by its lock file) into
#                       build/openapi/: Redocly's CLI, ajv and ajv-formats
#   make openapi-lint   redocly lint with ops/openapi/redocly.yaml
#
# test_openapi (make test) runs ops/openapi/validate.mjs with the node_modules
# installed here, so make test installs them first.

OPENAPI_DIR := build/openapi
OPENAPI_DOC := worker/openapi/openapi.json

.PHONY: openapi-deps openapi-lint
openapi-deps: $(OPENAPI_DIR)/node_modules/.stamp

$(OPENAPI_DIR)/node_modules/.stamp: ops/openapi/package.json ops/openapi/package-lock.json
	@command -v npm >/dev/null || { echo "openapi: npm is missing (ops/install-deps.sh test)" >&2; exit 1; }
	@mkdir -p $(OPENAPI_DIR)
	cp ops/openapi/package.json ops/openapi/package-lock.json $(OPENAPI_DIR)/
	cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

openapi-lint: openapi-deps
	$(OPENAPI_DIR)/node_modules/.bin/redocly lint --config ops/openapi/redocly.yaml $(OPENAPI_DOC)
